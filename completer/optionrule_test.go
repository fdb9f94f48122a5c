package completer_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first, with a nil engine or scanner; every error wraps
// store.ErrInvalid (idemkit.ErrInvalid).
func TestOptionsFollowTheOptionRule(t *testing.T) {
	s := testkit.NewMem(t)
	e := testkit.NewEngineOn(t, s)
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []completer.Option
		nilArgs      bool     // Find gets a nil engine and scanner
		errs         []string // what Find's error says, or nil when it accepts opts
	}{
		{name: "none"},
		{name: "older than", option: "WithOlderThan", opts: []completer.Option{completer.WithOlderThan(time.Hour)}},
		{name: "older than zero", option: "WithOlderThan", opts: []completer.Option{completer.WithOlderThan(0)}},
		{name: "negative older than", option: "WithOlderThan", opts: []completer.Option{completer.WithOlderThan(-time.Second)}, errs: []string{"WithOlderThan(-1s): "}},
		{name: "clock", option: "WithClock", opts: []completer.Option{completer.WithClock(time.Now)}},
		{name: "nil clock", option: "WithClock", opts: []completer.Option{completer.WithClock(nil)}, errs: []string{"WithClock(nil): "}},
		{name: "observer", option: "WithObserver", opts: []completer.Option{completer.WithObserver(func(completer.Abandoned) {})}},
		{name: "nil observer", option: "WithObserver", opts: []completer.Option{completer.WithObserver(nil)}, errs: []string{"WithObserver(nil): "}},
		{name: "outcomes", option: "WithOutcomes", opts: []completer.Option{completer.WithOutcomes(func(completer.Outcome) {})}},
		{name: "nil outcomes", option: "WithOutcomes", opts: []completer.Option{completer.WithOutcomes(nil)}, errs: []string{"WithOutcomes(nil): "}},
		{name: "passes", option: "WithPasses", opts: []completer.Option{completer.WithPasses(func(completer.Resumed, error) {})}},
		{name: "nil passes", option: "WithPasses", opts: []completer.Option{completer.WithPasses(nil)}, errs: []string{"WithPasses(nil): "}},
		{name: "nil", opts: []completer.Option{completer.WithOlderThan(0), nil}, errs: []string{"completer: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []completer.Option{nil, completer.WithClock(nil), completer.WithOlderThan(0), completer.WithOlderThan(-1), nil}, nilArgs: true,
			errs: []string{"option 1 is nil", "WithClock(nil): ", "WithOlderThan(-1ns): ", "option 5 is nil", "nil engine", "nil scanner"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		var err error
		if c.nilArgs {
			_, err = completer.Find(context.Background(), nil, nil, c.opts...)
		} else {
			_, err = completer.Find(context.Background(), e, s, c.opts...)
		}
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
