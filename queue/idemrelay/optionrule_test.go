package idemrelay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/queue/idemrelay"
)

// TestOptionsFollowTheOptionRule: every option is accepted when valid and
// refused, naming itself, when not or when given twice; a nil option is
// refused by its position; every error is reported and wraps ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	s := newOutbox(t, pg)
	pub, err := idemrelay.NewJetStream(connect(t))
	if err != nil {
		t.Fatal(err)
	}
	obs := func(idemrelay.Report) {}
	cases := []struct {
		name, option string
		opts         []idemrelay.Option
		errs         []string
	}{
		{name: "none"},
		{name: "batch", option: "WithBatchSize", opts: []idemrelay.Option{idemrelay.WithBatchSize(idemrelay.MaxBatchSize)}},
		{name: "zero batch", option: "WithBatchSize", opts: []idemrelay.Option{idemrelay.WithBatchSize(0)}, errs: []string{"WithBatchSize(0): "}},
		{name: "batch too large", option: "WithBatchSize", opts: []idemrelay.Option{idemrelay.WithBatchSize(idemrelay.MaxBatchSize + 1)}, errs: []string{"WithBatchSize(1001): "}},
		{name: "batch twice", option: "WithBatchSize", opts: []idemrelay.Option{idemrelay.WithBatchSize(5), idemrelay.WithBatchSize(6)}, errs: []string{"WithBatchSize given twice"}},
		{name: "poll", option: "WithPollInterval", opts: []idemrelay.Option{idemrelay.WithPollInterval(time.Millisecond)}},
		{name: "zero poll", option: "WithPollInterval", opts: []idemrelay.Option{idemrelay.WithPollInterval(0)}, errs: []string{"WithPollInterval(0s): "}},
		{name: "poll twice", option: "WithPollInterval", opts: []idemrelay.Option{idemrelay.WithPollInterval(time.Second), idemrelay.WithPollInterval(time.Second)}, errs: []string{"WithPollInterval given twice"}},
		{name: "backoff", option: "WithBackoff", opts: []idemrelay.Option{idemrelay.WithBackoff(time.Second, time.Second)}},
		{name: "backoff inverted", option: "WithBackoff", opts: []idemrelay.Option{idemrelay.WithBackoff(2*time.Second, time.Second)}, errs: []string{"WithBackoff(2s, 1s): "}},
		{name: "zero backoff", option: "WithBackoff", opts: []idemrelay.Option{idemrelay.WithBackoff(0, time.Second)}, errs: []string{"WithBackoff(0s, 1s): "}},
		{name: "backoff twice", option: "WithBackoff", opts: []idemrelay.Option{idemrelay.WithBackoff(time.Second, time.Second), idemrelay.WithBackoff(time.Second, time.Minute)}, errs: []string{"WithBackoff given twice"}},
		{name: "publish timeout", option: "WithPublishTimeout", opts: []idemrelay.Option{idemrelay.WithPublishTimeout(time.Second)}},
		{name: "zero publish timeout", option: "WithPublishTimeout", opts: []idemrelay.Option{idemrelay.WithPublishTimeout(0)}, errs: []string{"WithPublishTimeout(0s): "}},
		{name: "publish timeout twice", option: "WithPublishTimeout", opts: []idemrelay.Option{idemrelay.WithPublishTimeout(time.Second), idemrelay.WithPublishTimeout(time.Second)}, errs: []string{"WithPublishTimeout given twice"}},
		{name: "observer", option: "WithObserver", opts: []idemrelay.Option{idemrelay.WithObserver(obs)}},
		{name: "nil observer", option: "WithObserver", opts: []idemrelay.Option{idemrelay.WithObserver(nil)}, errs: []string{"WithObserver(nil): "}},
		{name: "observer twice", option: "WithObserver", opts: []idemrelay.Option{idemrelay.WithObserver(obs), idemrelay.WithObserver(obs)}, errs: []string{"WithObserver given twice"}},
		{name: "nil", opts: []idemrelay.Option{idemrelay.WithBatchSize(3), nil}, errs: []string{"option 2 is nil"}},
		{name: "every error", opts: []idemrelay.Option{nil, idemrelay.WithBatchSize(0), idemrelay.WithObserver(nil)},
			errs: []string{"option 1 is nil", "WithBatchSize(0): ", "WithObserver(nil): "}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		r, err := idemrelay.New(s, pub, c.opts...)
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		if r != nil {
			t.Errorf("%s: a Relay returned with its error", c.name)
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
	if _, err := idemrelay.New(nil, nil); err == nil || !strings.Contains(err.Error(), "nil *sqlstore.Store") || !strings.Contains(err.Error(), "nil Publisher") {
		t.Errorf("New(nil, nil): %v; want both named", err)
	}
}
