package completer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/testkit"
)

// Resume finishes an abandoned operation claimed with WithInput with the
// function registered for its name, skipping its recorded step; one
// without input and one whose name has no function are reported and left
// abandoned, so the next pass reports them again.
func TestResumeFinishesWhatItCanAndReportsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := testkit.NewMem(t)
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Second), idemkit.WithoutHeartbeat())
		var reserved, charged atomic.Int32
		reserve := func(context.Context) ([]byte, error) { reserved.Add(1); return nil, nil }
		for key, opts := range map[string][]idemkit.Option{
			"with-input":   {idemkit.WithInput("place-order", []byte("pen"))},
			"no-input":     nil,
			"unregistered": {idemkit.WithInput("refund", nil)},
		} {
			c, _, err := e.Begin(ctx, key, "fp", opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := idemkit.Step(c.Context(ctx), "reserve", reserve); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute) // the callers died, long enough ago
		funcs := idemkit.Funcs{"place-order": func(ctx context.Context, input []byte) ([]byte, error) {
			if _, err := idemkit.Step(ctx, "reserve", reserve); err != nil {
				return nil, err
			}
			return idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
				charged.Add(1)
				return append([]byte("charged for "), input...), nil
			})
		}}
		var seen []completer.Outcome
		res, err := completer.Resume(ctx, e, s, funcs, completer.WithOlderThan(30*time.Second),
			completer.WithOutcomes(func(o completer.Outcome) { seen = append(seen, o) }))
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != len(res.Outcomes) {
			t.Fatalf("WithOutcomes saw %d outcomes, the pass had %d", len(seen), len(res.Outcomes))
		}
		if len(res.Outcomes) != 3 {
			t.Fatalf("%d outcomes, want 3: %+v", len(res.Outcomes), res.Outcomes)
		}
		var resumed, noInput, noFunc int
		for _, o := range res.Outcomes {
			switch {
			case o.Resumed && o.Err == nil && string(o.Result.Value) == "charged for pen":
				resumed++
			case !o.Resumed && errors.Is(o.Err, idemkit.ErrNoInput):
				noInput++
			case !o.Resumed && errors.Is(o.Err, idemkit.ErrNoFunction):
				noFunc++
			default:
				t.Errorf("unexpected outcome %+v", o)
			}
		}
		if resumed != 1 || noInput != 1 || noFunc != 1 || reserved.Load() != 3 || charged.Load() != 1 {
			t.Fatalf("resumed %d, no input %d, no function %d; reserve ran %d, charge %d", resumed, noInput, noFunc, reserved.Load(), charged.Load())
		}
		again, err := completer.Find(ctx, e, s, completer.WithOlderThan(30*time.Second))
		if err != nil || len(again.Abandoned) != 2 {
			t.Fatalf("the next pass found %d abandoned (%v), want the 2 left", len(again.Abandoned), err)
		}
		r, err := e.Do(ctx, "with-input", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		if err != nil || !r.Replayed || string(r.Value) != "charged for pen" {
			t.Fatalf("the client's late retry = %q, %v, %v; want the resumed result", r.Value, r.Replayed, err)
		}
	})
}
