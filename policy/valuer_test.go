package policy_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// faultyValuer is a faultyStore that is also a store.SetNXValuer, obeying
// the same behaviour and counting its SetNXValue calls apart.
type faultyValuer struct {
	*faultyStore
	valueCalls atomic.Int64
}

func newFaultyValuer(t *testing.T) *faultyValuer {
	return &faultyValuer{faultyStore: newFaulty(t)}
}

func (f *faultyValuer) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	f.valueCalls.Add(1)
	if err := f.gate(ctx, "SetNXValue"); err != nil {
		return false, nil, err
	}
	set, e, err := f.Store.SetNX(ctx, key, value, ttl)
	return set, e.Value, err
}

var _ store.SetNXValuer = (*faultyValuer)(nil)

// The wrappers run the SetNXValue cases of the conformance suite on a real
// Redis (redisstore on Redis 7.0 claims with one SET NX PX GET).
func TestSetNXValueConformanceOverRedis(t *testing.T) {
	client := redistest.Start(t).Client(t)
	var n atomic.Int64
	redis := func(t *testing.T) store.Store {
		s, err := redisstore.New(client, redisstore.WithPrefix("v"+strconv.FormatInt(n.Add(1), 10)+":"))
		require.NoError(t, err)
		return s
	}
	t.Run("Budget", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return mustBudget(t, redis(t), conformanceBudget) })
	})
	t.Run("BudgetInline", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			return mustBudget(t, redis(t), conformanceBudget, policy.WithInline())
		})
	})
	t.Run("Tiered", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			s := mustTiered(t, redis(t), newMem(t))
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
}

// Budget is a store.SetNXValuer exactly when its store is, whatever else
// the store implements, and runs SetNXValue under the budget.
func TestBudgetExposesSetNXValuerOfItsStore(t *testing.T) {
	f := newFaultyValuer(t)
	inners := map[string]store.Store{
		"bare":                 bareStore{f},
		"closer":               struct{ closerOnly }{closerOnly{bareStore{f}}},
		"pinger":               struct{ pinger }{f.faultyStore},
		"closer+pinger":        f.faultyStore,
		"valuer":               struct{ valuerOnly }{valuerOnly{bareStore{f}, f}},
		"closer+valuer":        struct{ closerValuer }{closerValuer{closerOnly{bareStore{f}}, f}},
		"pinger+valuer":        struct{ pingerValuer }{pingerValuer{f.faultyStore, f}},
		"closer+pinger+valuer": f,
	}
	for name, inner := range inners {
		b := mustBudget(t, inner, time.Second)
		for _, check := range []struct {
			what          string
			inner, budget bool
		}{
			{"store.Closer", is[store.Closer](inner), is[store.Closer](b)},
			{"store.Pinger", is[store.Pinger](inner), is[store.Pinger](b)},
			{"store.SetNXValuer", is[store.SetNXValuer](inner), is[store.SetNXValuer](b)},
		} {
			assert.Equal(t, check.inner, check.budget, "%s: Budget is a %s", name, check.what)
		}
		if sv, ok := b.(store.SetNXValuer); ok {
			before := f.valueCalls.Load()
			set, _, err := sv.SetNXValue(ctx, "k-"+name, []byte("v"), time.Minute)
			require.NoError(t, err, name)
			require.True(t, set, name)
			require.Equal(t, before+1, f.valueCalls.Load(), "%s: Budget forwards SetNXValue", name)
		}
	}

	// A store that ignores its context is cut off at the budget.
	b := mustBudget(t, f, 30*time.Millisecond).(store.SetNXValuer)
	f.set(hanging)
	start := time.Now()
	_, _, err := b.SetNXValue(ctx, "hang", []byte("v"), time.Minute)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), hangDetector)
}

func is[T any](s store.Store) bool {
	_, ok := s.(T)
	return ok
}

// Building blocks of the stores above: each adds one optional method to
// a bareStore.
type (
	closerOnly struct{ bareStore }
	valuerOnly struct {
		bareStore
		v store.SetNXValuer
	}
	closerValuer struct {
		closerOnly
		v store.SetNXValuer
	}
	pingerValuer struct {
		pinger
		v store.SetNXValuer
	}
)

// pinger is a store.Store and store.Pinger, and nothing else.
type pinger interface {
	store.Store
	store.Pinger
}

func (closerOnly) Close() error { return nil }

func (s valuerOnly) SetNXValue(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, []byte, error) {
	return s.v.SetNXValue(ctx, k, v, ttl)
}

func (s closerValuer) SetNXValue(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, []byte, error) {
	return s.v.SetNXValue(ctx, k, v, ttl)
}

func (s pingerValuer) SetNXValue(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, []byte, error) {
	return s.v.SetNXValue(ctx, k, v, ttl)
}

// lateValueClaim is a lateClaim whose SetNXValue blocks and then applies
// as its SetNX does.
type lateValueClaim struct{ *lateClaim }

func (l lateValueClaim) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	set, e, err := l.SetNX(ctx, key, value, ttl)
	return set, e.Value, err
}

// A SetNXValue claim cut off at the budget may still land: the undo that
// follows waits for it, as it waits for a cut-off SetNX.
func TestBudgetUndoWaitsForACutOffSetNXValue(t *testing.T) {
	l := lateValueClaim{&lateClaim{bareStore: bareStore{newMem(t)}, release: make(chan struct{})}}
	s := mustBudget(t, l, 300*time.Millisecond)
	_, _, err := s.(store.SetNXValuer).SetNXValue(ctx, "k", []byte("claim"), time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, l.blocked.Load(), "the cut-off claim is still on its way")

	time.AfterFunc(10*time.Millisecond, func() { close(l.release) })
	ok, err := s.CompareAndDelete(ctx, "k", []byte("claim"))
	assert.False(t, l.overtaken.Load(), "the undo reached the store before the claim it undoes")
	if err == nil {
		assert.True(t, ok, "the undo deleted the claim")
		_, err = l.bareStore.Get(ctx, "k")
		assert.ErrorIs(t, err, store.ErrNotFound, "no orphan claim")
	} else {
		assert.ErrorIs(t, err, store.ErrUnavailable)
	}
}

// Tiered's SetNXValue goes to the primary's SetNXValue while the breaker
// is closed, to the fallback (journaled, then copied forward) while it is
// open, and to a tier's SetNX when the tier has no SetNXValue.
func TestTieredSetNXValue(t *testing.T) {
	p, f := newFaultyValuer(t), newFaulty(t)
	s := mustTiered(t, p, f, policy.WithFailureThreshold(1), policy.WithCoolDown(20*time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })

	set, _, err := s.SetNXValue(ctx, "closed", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	assert.EqualValues(t, 1, p.valueCalls.Load(), "the primary's SetNXValue")
	assert.Zero(t, f.calls.Load())
	set, v, err := s.SetNXValue(ctx, "closed", []byte("w"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	assert.Equal(t, []byte("v"), v)

	p.set(failing)
	_, _, err = s.SetNXValue(ctx, "lost", []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable, "the primary's failure is returned, not applied to the fallback")
	require.Equal(t, policy.BreakerOpen, s.State())

	set, _, err = s.SetNXValue(ctx, "outage", []byte("mine"), time.Minute)
	require.NoError(t, err)
	require.True(t, set, "the fallback (SetNX) took the claim")
	set, v, err = s.SetNXValue(ctx, "outage", []byte("other"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	assert.Equal(t, []byte("mine"), v)
	assert.Equal(t, 1, s.Stats().Journal)

	p.set(healthy)
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.State() == policy.BreakerClosed && s.Stats().Journal == 0
	}, hangDetector, 5*time.Millisecond)
	e, err := p.Store.Get(ctx, "outage")
	require.NoError(t, err)
	assert.Equal(t, []byte("mine"), e.Value, "the outage claim was copied forward")
	set, v, err = s.SetNXValue(ctx, "outage", []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	assert.Equal(t, []byte("mine"), v)

	// A primary without SetNXValue gets SetNX.
	bare := newFaulty(t)
	s2 := mustTiered(t, bare, newMem(t))
	t.Cleanup(func() { _ = s2.Close() })
	set, _, err = s2.SetNXValue(ctx, "k", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	assert.EqualValues(t, 1, bare.calls.Load())
}

func TestTieredSetNXValueOneWinnerDuringOutage(t *testing.T) {
	p, f := newFaultyValuer(t), newFaulty(t)
	s := mustTiered(t, p, f, policy.WithFailureThreshold(1), policy.WithCoolDown(time.Hour))
	t.Cleanup(func() { _ = s.Close() })
	openBreaker(t, s, p.faultyStore)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			var set bool
			var err error
			if i%2 == 0 {
				set, _, err = s.SetNXValue(ctx, "k", fmt.Appendf(nil, "v%d", i), time.Minute)
			} else {
				set, _, err = s.SetNX(ctx, "k", fmt.Appendf(nil, "v%d", i), time.Minute)
			}
			assert.NoError(t, err)
			if set {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, wins.Load())
}

// NearCache is not a store.SetNXValuer: it needs the TTL of what it
// caches, and a cached replay makes no round trip either way. The engine
// over it claims with SetNX: a replay is answered from the cache, and a
// miss fills it from the store's SetNX.
func TestNearCacheReplaysWithoutRoundTripOverAValuer(t *testing.T) {
	f := newFaultyValuer(t)
	nc := mustNear(t, f, idemkit.Settled)
	t.Cleanup(func() { _ = nc.Close() })
	_, isValuer := any(nc).(store.SetNXValuer)
	require.False(t, isValuer)

	e, err := idemkit.New(nc, idemkit.WithObserver(nil))
	require.NoError(t, err)
	fn := func(context.Context) ([]byte, error) { return []byte("r"), nil }
	_, err = e.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)

	// Another instance's cache: its first replay misses and fills.
	nc2 := mustNear(t, f, idemkit.Settled)
	e2, err := idemkit.New(nc2, idemkit.WithObserver(nil))
	require.NoError(t, err)
	res, err := e2.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	calls := f.calls.Load()
	for range 10 {
		res, err = e2.Do(ctx, "k", "fp", fn)
		require.NoError(t, err)
		require.True(t, res.Replayed)
		require.Equal(t, []byte("r"), res.Value)
	}
	assert.Equal(t, calls, f.calls.Load(), "cached replays make no store call")
	assert.Zero(t, f.valueCalls.Load())
}
