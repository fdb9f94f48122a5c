package completer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// Run passes at once and then every interval until its context ends:
// an operation abandoned between two passes is resumed by the next one,
// each pass is reported to WithPasses and each operation's outcome, by
// kind, to WithOutcomes.
func TestRunResumesEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testkit.NewMem(t)
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Second), idemkit.WithoutHeartbeat())
		var ran atomic.Int32
		funcs := idemkit.Funcs{"job": func(ctx context.Context, in []byte) ([]byte, error) {
			ran.Add(1)
			return in, nil
		}}
		var passes, abandoned atomic.Int32
		var mu sync.Mutex
		kinds := map[completer.Kind]int{}
		kind := func(k completer.Kind) int { mu.Lock(); defer mu.Unlock(); return kinds[k] }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- completer.Run(ctx, e, s, funcs, 10*time.Second, completer.WithOlderThan(5*time.Second),
				completer.WithPasses(func(r completer.Resumed, err error) {
					if err != nil {
						t.Errorf("pass: %v", err)
					}
					passes.Add(1)
					abandoned.Add(int32(len(r.Abandoned)))
				}),
				completer.WithOutcomes(func(o completer.Outcome) { mu.Lock(); kinds[o.Kind()]++; mu.Unlock() }))
		}()
		synctest.Wait()
		if passes.Load() != 1 || abandoned.Load() != 0 {
			t.Fatalf("after the first pass: %d passes, %d abandoned", passes.Load(), abandoned.Load())
		}
		for _, k := range []string{"a", "b"} {
			if _, _, err := e.Begin(t.Context(), k, "", idemkit.WithInput("job", []byte(k))); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := e.Begin(t.Context(), "c", ""); err != nil { // no input: reported
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if passes.Load() != 2 || ran.Load() != 2 || kind(completer.KindResumed) != 2 || kind(completer.KindReported) != 1 {
			t.Fatalf("after the second pass: %d passes, %d runs, %d resumed, %d reported", passes.Load(), ran.Load(), kind(completer.KindResumed), kind(completer.KindReported))
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if passes.Load() != 3 || kind(completer.KindReported) != 2 || ran.Load() != 2 {
			t.Fatalf("the third pass: %d passes, %d runs, %d reported; want c reported again", passes.Load(), ran.Load(), kind(completer.KindReported))
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
		r, err := e.Do(t.Context(), "a", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		if err != nil || string(r.Value) != "a" {
			t.Fatalf("a's retry: %q, %v", r.Value, err)
		}
	})
}

// Run refuses a nil engine or scanner and an interval that is not
// positive, at once.
func TestRunRefusesBadArguments(t *testing.T) {
	s := testkit.NewMem(t)
	e := testkit.NewEngineOn(t, s)
	err := completer.Run(t.Context(), nil, nil, nil, 0)
	if !errors.Is(err, idemkit.ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"nil engine", "nil scanner", "interval 0s must be positive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := completer.Run(t.Context(), e, s, nil, -time.Second); !errors.Is(err, idemkit.ErrInvalid) {
		t.Errorf("negative interval: %v", err)
	}
}

// Each Outcome has one Kind, and each Kind a metrics name.
func TestOutcomeKinds(t *testing.T) {
	for _, c := range []struct {
		o    completer.Outcome
		want completer.Kind
		name string
	}{
		{completer.Outcome{Resumed: true}, completer.KindResumed, "resumed"},
		{completer.Outcome{Resumed: true, Err: errors.New("card declined")}, completer.KindFailed, "failed"},
		{completer.Outcome{Err: idemkit.ErrNoInput}, completer.KindReported, "reported"},
		{completer.Outcome{Err: idemkit.ErrNoFunction}, completer.KindReported, "reported"},
		{completer.Outcome{Err: idemkit.ErrNotAbandoned}, completer.KindTaken, "taken"},
		{completer.Outcome{Err: store.ErrUnavailable}, completer.KindError, "error"},
	} {
		if got := c.o.Kind(); got != c.want || got.String() != c.name {
			t.Errorf("%+v: kind %v (%d), want %s", c.o, got, got, c.name)
		}
	}
	if got := completer.Kind(0).String(); got != "Kind(0)" {
		t.Errorf("Kind(0) = %q", got)
	}
}
