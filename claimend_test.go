package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// endRecorder records, per mode and key, the events observed, so a test
// can check that every admitted claim has exactly one event carrying a
// Duration: the one that ends it.
type endRecorder struct {
	mu     sync.Mutex
	events map[string][]idemkit.Event
}

func (r *endRecorder) Observe(_ context.Context, ev idemkit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = make(map[string][]idemkit.Event)
	}
	k := string(ev.Mode) + "/" + ev.Key
	r.events[k] = append(r.events[k], ev)
}

// check reports, for the key of mode, how many claims were admitted and
// how many events carried a Duration, and the kinds seen.
func (r *endRecorder) check(mode idemkit.Mode, key string) (admitted, timed int, kinds string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, ev := range r.events[string(mode)+"/"+key] {
		name := string(ev.Kind)
		switch {
		case ev.Kind == idemkit.EventAdmitted:
			admitted++
		case ev.Duration > 0:
			timed++
			name += "(timed)"
		case ev.Duration != 0:
			name += "(negative duration)"
			timed += 100 // fails every check
		}
		names = append(names, name)
	}
	return admitted, timed, strings.Join(names, " ")
}

// breaking is a store whose swaps, deletes and reads fail with the error
// set for them, while set.
type breaking struct {
	store.Store
	cas, cad, get atomic.Pointer[error]
}

func fail(p *atomic.Pointer[error], err error) { p.Store(&err) }

func (b *breaking) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if err := b.cas.Load(); err != nil {
		return false, *err
	}
	return b.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func (b *breaking) CompareAndDelete(ctx context.Context, k string, old []byte) (bool, error) {
	if err := b.cad.Load(); err != nil {
		return false, *err
	}
	return b.Store.CompareAndDelete(ctx, k, old)
}

func (b *breaking) Get(ctx context.Context, k string) (store.Entry, error) {
	if err := b.get.Load(); err != nil {
		return store.Entry{}, *err
	}
	return b.Store.Get(ctx, k)
}

func (b *breaking) heal() {
	b.cas.Store(nil)
	b.cad.Store(nil)
	b.get.Store(nil)
}

// Every way an admitted claim ends (Do, UseToken, Begin, BeginBatch;
// completed, failed, released, oversized, lease lost, store failure,
// panic, completed in a transaction that commits or rolls back) reports
// exactly one event with a Duration, so an observer can count claims in
// flight from the events alone. Guard claims report none.
func TestEveryAdmittedClaimHasOneTimedEnd(t *testing.T) {
	mem := testkit.NewMem(t)
	st := &breaking{Store: mem}
	rec := &endRecorder{}
	e, err := idemkit.New(st, idemkit.WithObserver(rec), idemkit.WithErrorCodec(idemkit.FinalErrors(errDeclined)),
		idemkit.WithMaxResultSize(16))
	require.NoError(t, err)
	ctx := context.Background()
	down := store.Unavailable("test", errors.New("connection refused"))
	broken := fmt.Errorf("%w: test", store.ErrCorrupt) // a store failure that is not ErrUnavailable
	big := make([]byte, 64)
	ok := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	forget := func(ctx context.Context, mode idemkit.Mode, key string) {
		_, err := e.Forget(ctx, mode, key)
		require.NoError(t, err)
	}
	// inTx completes the claim of fn's ctx in a transaction, committed or
	// not, and returns v and err.
	inTx := func(commit bool, value []byte, v []byte, err error, opts ...func(ctx context.Context)) func(context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			tx := storetest.NewTx(mem)
			_ = idemkit.ClaimFromContext(ctx).CompleteIn(ctx, tx, value)
			for _, o := range opts {
				o(ctx)
			}
			if commit {
				tx.Commit()
			}
			return v, err
		}
	}
	tokens := func() string {
		tk, err := e.IssueToken(ctx, "p")
		require.NoError(t, err)
		return tk.Value
	}
	releaseKey := idemkit.WithOversized(idemkit.ReleaseKey)

	type run func(key string)
	do := func(fn func(context.Context) ([]byte, error), opts ...idemkit.Option) run {
		return func(key string) {
			defer func() { _ = recover() }()
			_, _ = e.Do(ctx, key, "fp", fn, opts...)
		}
	}
	cases := []struct {
		name string
		mode idemkit.Mode
		run  run
	}{
		{"do completed", idemkit.ModeDo, do(ok)},
		{"do failed, released", idemkit.ModeDo, do(func(context.Context) ([]byte, error) { return nil, errors.New("retry me") })},
		{"do failed final, recorded", idemkit.ModeDo, do(func(context.Context) ([]byte, error) { return nil, errDeclined })},
		{"do oversized, terminal record", idemkit.ModeDo, do(func(context.Context) ([]byte, error) { return big, nil })},
		{"do oversized, released", idemkit.ModeDo, do(func(context.Context) ([]byte, error) { return big, nil }, releaseKey)},
		{"do lease lost at completion", idemkit.ModeDo, nil},
		{"do lease lost at release", idemkit.ModeDo, nil},
		{"do store unavailable at completion", idemkit.ModeDo, do(func(context.Context) ([]byte, error) {
			fail(&st.cas, down)
			return []byte("ok"), nil
		})},
		{"do store broken at completion, then released", idemkit.ModeDo, do(func(context.Context) ([]byte, error) {
			fail(&st.cas, broken)
			return []byte("ok"), nil
		})},
		{"do store fails at release", idemkit.ModeDo, do(func(context.Context) ([]byte, error) {
			fail(&st.cad, down)
			return nil, errors.New("retry me")
		})},
		{"do panics", idemkit.ModeDo, do(func(context.Context) ([]byte, error) { panic("boom") })},
		{"do in tx, committed", idemkit.ModeDo, do(inTx(true, []byte("ok"), []byte("ok"), nil))},
		{"do in tx, rolled back", idemkit.ModeDo, do(inTx(false, []byte("ok"), nil, errors.New("rolled back")))},
		{"do in tx, rolled back, fn releases", idemkit.ModeDo, do(inTx(false, []byte("ok"), nil, errors.New("rolled back"),
			func(ctx context.Context) { idemkit.ClaimFromContext(ctx).Release(ctx) }))},
		{"do in tx, panics", idemkit.ModeDo, do(func(ctx context.Context) ([]byte, error) {
			_ = idemkit.ClaimFromContext(ctx).CompleteIn(ctx, storetest.NewTx(mem), []byte("ok"))
			panic("boom")
		})},
		{"do in tx, oversized, committed", idemkit.ModeDo, do(inTx(true, big, big, nil))},
		{"do in tx, oversized, rolled back", idemkit.ModeDo, do(inTx(false, big, nil, errors.New("rolled back")))},
		{"do in tx, oversized under ReleaseKey", idemkit.ModeDo, do(inTx(false, big, nil, errors.New("rolled back")), releaseKey)},
		{"do in tx, oversized under ReleaseKey, lease lost", idemkit.ModeDo, nil},
		{"do in tx, oversized under ReleaseKey, fn releases after lease lost", idemkit.ModeDo, nil},
		{"do in tx, oversized under ReleaseKey, store fails reading", idemkit.ModeDo, do(inTx(false, big, nil, nil,
			func(context.Context) { fail(&st.get, down) }), releaseKey)},
		{"do in tx, oversized under ReleaseKey, store fails reading, lease lost", idemkit.ModeDo, nil},
		{"do in tx, store unavailable at completion", idemkit.ModeDo, do(func(ctx context.Context) ([]byte, error) {
			return nil, idemkit.ClaimFromContext(ctx).CompleteIn(ctx, &breakingTx{down}, []byte("ok"))
		})},
		{"token completed", idemkit.ModeToken, nil},
		{"token failed, spent", idemkit.ModeToken, nil},
		{"token panics", idemkit.ModeToken, nil},
		{"token lease lost", idemkit.ModeToken, nil},
		{"token store fails at completion", idemkit.ModeToken, nil},
		{"begin, completed", idemkit.ModeDo, func(key string) {
			c, _, err := e.Begin(ctx, key, "fp")
			require.NoError(t, err)
			require.NoError(t, c.Complete(ctx, []byte("ok")))
			c.Release(ctx)
			_ = c.Complete(ctx, []byte("again"))
		}},
		{"begin, released", idemkit.ModeDo, func(key string) {
			c, _, err := e.Begin(ctx, key, "fp")
			require.NoError(t, err)
			c.Release(ctx)
			c.Release(ctx)
		}},
		{"begin, failed", idemkit.ModeDo, func(key string) {
			c, _, err := e.Begin(ctx, key, "fp")
			require.NoError(t, err)
			_ = c.Fail(ctx, errors.New("retry me"))
			c.Release(ctx)
		}},
		{"begin, in tx, rolled back, released", idemkit.ModeDo, func(key string) {
			c, _, err := e.Begin(ctx, key, "fp")
			require.NoError(t, err)
			require.NoError(t, c.CompleteIn(ctx, storetest.NewTx(mem), []byte("ok")))
			c.Release(ctx)
		}},
		{"begin, in tx, committed, released", idemkit.ModeDo, func(key string) {
			c, _, err := e.Begin(ctx, key, "fp")
			require.NoError(t, err)
			tx := storetest.NewTx(mem)
			require.NoError(t, c.CompleteIn(ctx, tx, []byte("ok")))
			tx.Commit()
			c.Release(ctx)
		}},
		{"begin, in tx, oversized under ReleaseKey, released after lease lost", idemkit.ModeDo, func(key string) {
			c, _, err := e.Begin(ctx, key, "fp", releaseKey)
			require.NoError(t, err)
			require.ErrorIs(t, c.CompleteIn(ctx, storetest.NewTx(mem), big), idemkit.ErrResultTooLarge)
			forget(ctx, idemkit.ModeDo, key)
			c.Release(ctx)
		}},
		{"batch, completed and released", idemkit.ModeDo, func(key string) {
			out, err := e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: key, Fingerprint: "fp"}, {Key: key + "/2", Fingerprint: "fp"}})
			require.NoError(t, err)
			require.NoError(t, out[0].Claim.Complete(ctx, []byte("ok")))
			out[1].Claim.Release(ctx)
		}},
	}
	for i, c := range cases {
		key := fmt.Sprintf("k%d", i)
		switch c.name {
		case "do lease lost at completion":
			c.run = do(func(ctx context.Context) ([]byte, error) { forget(ctx, idemkit.ModeDo, key); return []byte("ok"), nil })
		case "do lease lost at release":
			c.run = do(func(ctx context.Context) ([]byte, error) {
				forget(ctx, idemkit.ModeDo, key)
				return nil, errors.New("retry me")
			})
		case "do in tx, oversized under ReleaseKey, lease lost":
			c.run = do(inTx(false, big, nil, nil, func(ctx context.Context) { forget(ctx, idemkit.ModeDo, key) }), releaseKey)
		case "do in tx, oversized under ReleaseKey, fn releases after lease lost":
			c.run = do(inTx(false, big, nil, nil, func(ctx context.Context) {
				forget(ctx, idemkit.ModeDo, key)
				idemkit.ClaimFromContext(ctx).Release(ctx)
			}), releaseKey)
		case "do in tx, oversized under ReleaseKey, store fails reading, lease lost":
			c.run = do(inTx(false, big, nil, nil, func(ctx context.Context) {
				forget(ctx, idemkit.ModeDo, key)
				fail(&st.get, down)
			}), releaseKey)
		}
		if c.mode == idemkit.ModeToken {
			key = tokens()
			var fn func(context.Context) ([]byte, error)
			switch c.name {
			case "token completed":
				fn = ok
			case "token failed, spent":
				fn = func(context.Context) ([]byte, error) { return nil, errors.New("x") }
			case "token panics":
				fn = func(context.Context) ([]byte, error) { panic("boom") }
			case "token lease lost":
				fn = func(ctx context.Context) ([]byte, error) {
					forget(ctx, idemkit.ModeToken, key)
					return []byte("ok"), nil
				}
			case "token store fails at completion":
				fn = func(context.Context) ([]byte, error) { fail(&st.cas, down); return []byte("ok"), nil }
			}
			tok := key
			c.run = func(string) {
				defer func() { _ = recover() }()
				_, _ = e.UseToken(ctx, "p", tok, fn)
			}
		}
		c.run(key)
		st.heal()
		keys := []string{key}
		if strings.HasPrefix(c.name, "batch") {
			keys = append(keys, key+"/2")
		}
		for _, k := range keys {
			admitted, timed, kinds := rec.check(c.mode, k)
			assert.Equal(t, 1, admitted, "%s: admitted (%s)", c.name, kinds)
			assert.Equal(t, 1, timed, "%s: events with a Duration, want exactly one (%s)", c.name, kinds)
		}
	}

	// Guard claims report no Duration, whichever way they end.
	for i, opt := range []idemkit.Option{
		idemkit.WithRelease(idemkit.KeepUntilExpiry), idemkit.WithRelease(idemkit.ReleaseOnDone), idemkit.WithRelease(idemkit.ReleaseOnError),
	} {
		key := fmt.Sprintf("g%d", i)
		_ = e.Guard(ctx, key, func(context.Context) error { return nil }, opt)
		_ = e.Guard(ctx, key+"/failed", func(context.Context) error { return errors.New("x") }, opt)
		for _, k := range []string{key, key + "/failed"} {
			admitted, timed, kinds := rec.check(idemkit.ModeGuard, k)
			assert.Equal(t, 1, admitted, "guard %s (%s)", k, kinds)
			assert.Zero(t, timed, "guard %s (%s)", k, kinds)
		}
	}
}

// breakingTx is a transaction view whose swaps fail with err.
type breakingTx struct{ err error }

func (b *breakingTx) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, b.err
}
func (b *breakingTx) Get(context.Context, string) (store.Entry, error) { return store.Entry{}, b.err }
func (b *breakingTx) CompareAndSwap(context.Context, string, []byte, []byte, time.Duration) (bool, error) {
	return false, b.err
}
func (b *breakingTx) CompareAndDelete(context.Context, string, []byte) (bool, error) {
	return false, b.err
}
func (b *breakingTx) Consume(context.Context, string) ([]byte, error) { return nil, b.err }

// TestDurationStartsAtAdmission: a caller that waited (WithWait) for
// another's claim to end, then won the key, reports how long its own work
// ran, not the wait.
func TestDurationStartsAtAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = 300 * time.Millisecond
		var rec endRecorder
		e := testkit.NewEngine(t, idemkit.WithObserver(&rec))
		ctx := context.Background()
		started := make(chan struct{})
		go func() {
			_, _ = e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
				close(started)
				time.Sleep(hold)
				return nil, errors.New("transient: the key is released")
			})
		}()
		<-started
		res, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return []byte("second"), nil },
			idemkit.WithWait(10*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, "second", string(res.Value))
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var completed []time.Duration
		for _, ev := range rec.events["do/k"] {
			if ev.Kind == idemkit.EventCompleted {
				completed = append(completed, ev.Duration)
			}
		}
		require.Len(t, completed, 1)
		assert.Less(t, completed[0], hold/2, "the waiter's Duration counts the time it waited")
	})
}
