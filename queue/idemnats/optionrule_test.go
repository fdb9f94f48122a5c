package idemnats_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemnats"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid (idemkit.ErrInvalid).
func TestOptionsFollowTheOptionRule(t *testing.T) {
	e := testkit.NewEngine(t)
	js := connect(t)
	fn := func(context.Context, jetstream.Msg) ([]byte, error) { return nil, nil }
	key := func(jetstream.Msg) (string, error) { return "k", nil }
	final := func(error) bool { return false }
	report := func(context.Context, jetstream.Msg, idemnats.Outcome) {}
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []idemnats.Option
		errs         []string // what NewHandler's error says, or nil when it accepts opts
	}{
		{name: "none"},
		{name: "key", option: "WithKey", opts: []idemnats.Option{idemnats.WithKey(key)}},
		{name: "nil key", option: "WithKey", opts: []idemnats.Option{idemnats.WithKey(nil)}, errs: []string{"WithKey(nil): "}},
		{name: "body key", option: "WithBodyKey", opts: []idemnats.Option{idemnats.WithBodyKey("data.order_id")}},
		{name: "body key through arrays", option: "WithBodyKey", opts: []idemnats.Option{idemnats.WithBodyKey("items[].id")}, errs: []string{"WithBodyKey: ", `"items[].id"`}},
		{name: "bad body key", option: "WithBodyKey", opts: []idemnats.Option{idemnats.WithBodyKey("a..b")}, errs: []string{"WithBodyKey: ", `"a..b"`}},
		{name: "include", option: "WithInclude", opts: []idemnats.Option{idemnats.WithInclude("amount", "items[].sku")}},
		{name: "include nothing", option: "WithInclude", opts: []idemnats.Option{idemnats.WithInclude()}, errs: []string{"WithInclude: no paths"}},
		{name: "bad include", option: "WithInclude", opts: []idemnats.Option{idemnats.WithInclude("a..b")}, errs: []string{"WithInclude: ", `"a..b"`}},
		{name: "include with fingerprint", option: "WithInclude", opts: []idemnats.Option{idemnats.WithInclude("a"), idemnats.WithFingerprint(key)}, errs: []string{"cannot be combined with WithFingerprint"}},
		{name: "volatile", option: "WithVolatile", opts: []idemnats.Option{idemnats.WithVolatile("sent_at")}},
		{name: "volatile nothing", option: "WithVolatile", opts: []idemnats.Option{idemnats.WithVolatile()}, errs: []string{"WithVolatile: no paths"}},
		{name: "bad volatile", option: "WithVolatile", opts: []idemnats.Option{idemnats.WithVolatile("a[")}, errs: []string{"WithVolatile: ", `"a["`}},
		{name: "fingerprint", option: "WithFingerprint", opts: []idemnats.Option{idemnats.WithFingerprint(key)}},
		{name: "nil fingerprint", option: "WithFingerprint", opts: []idemnats.Option{idemnats.WithFingerprint(nil)}, errs: []string{"WithFingerprint(nil): "}},
		{name: "error codec", option: "WithErrorCodec", opts: []idemnats.Option{idemnats.WithErrorCodec(idemkit.FinalErrors())}},
		{name: "nil error codec", option: "WithErrorCodec", opts: []idemnats.Option{idemnats.WithErrorCodec(nil)}, errs: []string{"WithErrorCodec(nil): "}},
		{name: "final", option: "WithFinal", opts: []idemnats.Option{idemnats.WithFinal(final)}},
		{name: "nil final", option: "WithFinal", opts: []idemnats.Option{idemnats.WithFinal(nil)}, errs: []string{"WithFinal(nil): "}},
		{name: "retry delay", option: "WithRetryDelay", opts: []idemnats.Option{idemnats.WithRetryDelay(0)}},
		{name: "negative retry delay", option: "WithRetryDelay", opts: []idemnats.Option{idemnats.WithRetryDelay(-time.Second)}, errs: []string{"WithRetryDelay(-1s): "}},
		{name: "backoff", option: "WithBackoff", opts: []idemnats.Option{idemnats.WithBackoff(time.Millisecond, time.Second)}},
		{name: "max under first", option: "WithBackoff", opts: []idemnats.Option{idemnats.WithBackoff(time.Second, time.Millisecond)}, errs: []string{"WithBackoff(1s, 1ms): "}},
		{name: "max attempts", option: "WithMaxAttempts", opts: []idemnats.Option{idemnats.WithMaxAttempts(1)}},
		{name: "zero max attempts", option: "WithMaxAttempts", opts: []idemnats.Option{idemnats.WithMaxAttempts(0)}, errs: []string{"WithMaxAttempts(0): "}},
		{name: "report", option: "WithReport", opts: []idemnats.Option{idemnats.WithReport(report)}},
		{name: "nil report", option: "WithReport", opts: []idemnats.Option{idemnats.WithReport(nil)}, errs: []string{"WithReport(nil): "}},
		{name: "logger", option: "WithLogger", opts: []idemnats.Option{idemnats.WithLogger(slog.Default())}},
		{name: "nil logger", option: "WithLogger", opts: []idemnats.Option{idemnats.WithLogger(nil)}, errs: []string{"WithLogger(nil): "}},
		{name: "engine options", option: "WithEngineOptions", opts: []idemnats.Option{idemnats.WithEngineOptions(idemkit.WithLease(time.Minute))}},
		{name: "bad engine option", option: "WithEngineOptions", opts: []idemnats.Option{idemnats.WithEngineOptions(idemkit.WithLease(0))}, errs: []string{"WithEngineOptions: ", "WithLease(0s): must be at least 3ms"}},
		{name: "error codec in the engine options too", option: "WithErrorCodec", opts: []idemnats.Option{idemnats.WithErrorCodec(idemkit.FinalErrors()), idemnats.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors()))},
			errs: []string{"WithEngineOptions: ", "WithErrorCodec: given twice"}},
		{name: "error codec in the engine options only", option: "WithEngineOptions", opts: []idemnats.Option{idemnats.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors()))}},
		{name: "in progress", option: "WithInProgress", opts: []idemnats.Option{idemnats.WithInProgress(time.Second)}},
		{name: "zero in progress", option: "WithInProgress", opts: []idemnats.Option{idemnats.WithInProgress(0)}, errs: []string{"WithInProgress(0s): "}},
		{name: "dead letter", option: "WithDeadLetter", opts: []idemnats.Option{idemnats.WithDeadLetter(js, "dead")}},
		{name: "nil dead letter", option: "WithDeadLetter", opts: []idemnats.Option{idemnats.WithDeadLetter(nil, "dead")}, errs: []string{"WithDeadLetter(nil, \"dead\"): "}},
		{name: "no dead letter subject", option: "WithDeadLetter", opts: []idemnats.Option{idemnats.WithDeadLetter(js, "")}, errs: []string{"WithDeadLetter(js, \"\"): "}},
		{name: "nil", opts: []idemnats.Option{idemnats.WithMaxAttempts(3), nil}, errs: []string{"idemnats: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []idemnats.Option{nil, idemnats.WithKey(nil), idemnats.WithMaxAttempts(3), idemnats.WithLogger(nil), nil},
			errs: []string{"option 1 is nil", "WithKey(nil): ", "WithLogger(nil): ", "option 5 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		h, err := idemnats.NewHandler(e, "n", fn, c.opts...)
		if c.errs == nil {
			if err != nil || h == nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		if h != nil {
			t.Errorf("%s: a Handler returned with its error", c.name)
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
