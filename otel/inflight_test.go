package idemotel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	idemotel "github.com/idemkit/idemkit/otel"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// flaky wraps a store and fails the operations switched on, with
// ErrUnavailable.
type flaky struct {
	store.Store
	setnx, cas atomic.Bool
}

var errDown = store.Unavailable("test", errors.New("down"))

func (f *flaky) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if f.setnx.Load() {
		return false, store.Entry{}, errDown
	}
	return f.Store.SetNX(ctx, key, value, ttl)
}

func (f *flaky) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if f.cas.Load() {
		return false, errDown
	}
	return f.Store.CompareAndSwap(ctx, key, old, new, ttl)
}

// inFlight sums idemkit.claims.in_flight over its attributes.
func inFlight(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "idemkit.claims.in_flight" {
				continue
			}
			found = true
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				n += dp.Value
			}
		}
	}
	if !found {
		t.Fatal("no idemkit.claims.in_flight metric")
	}
	return n
}

var errFinal = errors.New("card declined")

// Every path through Do, UseToken and Begin leaves the in-flight gauge
// where it found it: 1 while the admitted work runs, 0 once the claim has
// ended, whatever ended it. Guard executions are not counted.
func TestInFlightIsBalancedOnEveryPath(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs, err := idemotel.NewObserver(idemotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	mem := testkit.NewMem(t)
	st := &flaky{Store: mem}
	e, err := idemkit.New(st, idemkit.WithObserver(obs), idemkit.WithErrorCodec(idemkit.FinalErrors(errFinal)),
		idemkit.WithMaxResultSize(16))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// during is the gauge seen from inside the work of the last call.
	var during int64
	ok := func(ctx context.Context) ([]byte, error) {
		during = inFlight(t, reader)
		return []byte("ok"), nil
	}
	fails := func(err error) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) {
			during = inFlight(t, reader)
			return nil, err
		}
	}
	guardOK := func(context.Context) error { during = inFlight(t, reader); return nil }
	tok := func() string {
		tk, err := e.IssueToken(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		return tk.Value
	}
	usedTok := tok()
	if _, err := e.UseToken(ctx, "p", usedTok, ok); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, "done", "fp", ok); err != nil {
		t.Fatal(err)
	}
	if err := e.Guard(ctx, "guarded", guardOK); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name       string
		call       func() error
		wantDuring int64 // -1: the work does not run
	}{
		{"do completed", func() error { _, err := e.Do(ctx, "k1", "fp", ok); return err }, 1},
		{"do failed, released", func() error { _, err := e.Do(ctx, "k2", "fp", fails(errors.New("retry me"))); return err }, 1},
		{"do failed final, recorded", func() error { _, err := e.Do(ctx, "k3", "fp", fails(errFinal)); return err }, 1},
		{"do result too large", func() error {
			_, err := e.Do(ctx, "k4", "fp", func(context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				return make([]byte, 64), nil
			})
			return err
		}, 1},
		{"do lease lost", func() error {
			_, err := e.Do(ctx, "k5", "fp", func(ctx context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				if _, err := e.Forget(ctx, idemkit.ModeDo, "k5"); err != nil {
					t.Fatal(err)
				}
				return []byte("ok"), nil
			})
			return err
		}, 1},
		{"do store fails recording", func() error {
			_, err := e.Do(ctx, "k6", "fp", func(ctx context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				st.cas.Store(true)
				return []byte("ok"), nil
			})
			st.cas.Store(false)
			return err
		}, 1},
		{"do panics", func() (err error) {
			defer func() {
				if recover() == nil {
					err = errors.New("no panic")
				}
			}()
			_, err = e.Do(ctx, "k7", "fp", func(context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				panic("boom")
			})
			return err
		}, 1},
		{"do fail-open", func() error {
			st.setnx.Store(true)
			defer st.setnx.Store(false)
			_, err := e.Do(ctx, "k8", "fp", ok, idemkit.WithFailureMode(idemkit.FailOpen))
			return err
		}, 0},
		{"do fail-closed", func() error {
			st.setnx.Store(true)
			defer st.setnx.Store(false)
			_, err := e.Do(ctx, "k9", "fp", ok)
			return err
		}, -1},
		{"do replay", func() error { _, err := e.Do(ctx, "done", "fp", ok); return err }, -1},
		{"do mismatch", func() error { _, err := e.Do(ctx, "done", "other", ok); return err }, -1},
		{"do in progress", func() error {
			_, err := e.Do(ctx, "k10", "fp", func(ctx context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				if _, err := e.Do(ctx, "k10", "fp", ok); !errors.Is(err, idemkit.ErrInProgress) {
					t.Errorf("inner Do: %v, want ErrInProgress", err)
				}
				if n := inFlight(t, reader); n != 1 {
					t.Errorf("after the refused repeat: in flight %d, want 1", n)
				}
				return []byte("ok"), nil
			})
			return err
		}, 1},
		{"token completed", func() error { _, err := e.UseToken(ctx, "p", tok(), ok); return err }, 1},
		{"token failed, spent", func() error { _, err := e.UseToken(ctx, "p", tok(), fails(errors.New("x"))); return err }, 1},
		{"token panics", func() (err error) {
			defer func() {
				if recover() == nil {
					err = errors.New("no panic")
				}
			}()
			_, err = e.UseToken(ctx, "p", tok(), func(context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				panic("boom")
			})
			return err
		}, 1},
		{"token reused", func() error { _, err := e.UseToken(ctx, "p", usedTok, ok); return err }, -1},
		{"token invalid", func() error { _, err := e.UseToken(ctx, "p", "nonsense", ok); return err }, -1},
		{"guard admitted (not counted)", func() error { return e.Guard(ctx, "g1", guardOK) }, 0},
		{"guard failed, released", func() error {
			return e.Guard(ctx, "g2", func(context.Context) error { during = inFlight(t, reader); return errors.New("x") })
		}, 0},
		{"guard duplicate", func() error { return e.Guard(ctx, "guarded", guardOK) }, -1},
		{"begin, completed", func() error {
			c, _, err := e.Begin(ctx, "b1", "fp")
			if err != nil {
				return err
			}
			during = inFlight(t, reader)
			return c.Complete(ctx, []byte("ok"))
		}, 1},
		{"begin, released", func() error {
			c, _, err := e.Begin(ctx, "b2", "fp")
			if err != nil {
				return err
			}
			during = inFlight(t, reader)
			c.Release(ctx)
			return nil
		}, 1},
		{"begin, lease lost", func() error {
			c, _, err := e.Begin(ctx, "b3", "fp")
			if err != nil {
				return err
			}
			during = inFlight(t, reader)
			if _, err := e.Forget(ctx, idemkit.ModeDo, "b3"); err != nil {
				t.Fatal(err)
			}
			return c.Complete(ctx, []byte("ok"))
		}, 1},
		{"batch, completed and released", func() error {
			out, err := e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "b4", Fingerprint: "fp"}, {Key: "b5", Fingerprint: "fp"}})
			if err != nil {
				return err
			}
			during = inFlight(t, reader) - 1 // two claims
			out[1].Claim.Release(ctx)
			return out[0].Claim.Complete(ctx, []byte("ok"))
		}, 1},
		{"do completed in a transaction that rolled back", func() error {
			_, err := e.Do(ctx, "k11", "fp", func(ctx context.Context) ([]byte, error) {
				during = inFlight(t, reader)
				if err := idemkit.ClaimFromContext(ctx).CompleteIn(ctx, storetest.NewTx(mem), []byte("ok")); err != nil {
					t.Fatal(err)
				}
				return nil, errors.New("rolled back")
			})
			return err
		}, 1},
		{"guard fail-open", func() error {
			st.setnx.Store(true)
			defer st.setnx.Store(false)
			return e.Guard(ctx, "g3", guardOK, idemkit.WithFailureMode(idemkit.FailOpen))
		}, 0},
	} {
		during = -1
		_ = c.call()
		if during != c.wantDuring {
			t.Errorf("%s: in flight while the work ran = %d, want %d", c.name, during, c.wantDuring)
		}
		if n := inFlight(t, reader); n != 0 {
			t.Errorf("%s: in flight after the call = %d, want 0", c.name, n)
		}
	}
}

// A replay with the observer counting metrics (no tracer provider)
// allocates no more than with the no-op observer: Start wraps nothing when
// it does not trace, and claims in flight are counted from the events.
func TestReplayAllocatesNoMoreThanNoop(t *testing.T) {
	obs, err := idemotel.NewObserver(idemotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	if err != nil {
		t.Fatal(err)
	}
	replay := func(o idemkit.Observer) float64 {
		mem := testkit.NewMem(t)
		e, err := idemkit.New(mem, idemkit.WithObserver(o))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		fn := func(context.Context) ([]byte, error) { return []byte("result"), nil }
		if _, err := e.Do(ctx, "k", "fp", fn); err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(200, func() {
			if res, err := e.Do(ctx, "k", "fp", fn); err != nil || !res.Replayed {
				t.Fatal(res, err)
			}
		})
	}
	noop, counted := replay(nil), replay(obs)
	if counted > noop {
		t.Errorf("a replay allocates %v times with the OTel observer, %v with the no-op observer", counted, noop)
	}
}
