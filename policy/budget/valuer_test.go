package budget_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// The wrappers run the SetNXValue cases of the conformance suite on a real
// Redis (redisstore on Redis 7.0 claims with one SET NX PX GET).
func TestBudgetSetNXValueConformanceOverRedis(t *testing.T) {
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
			return mustBudget(t, redis(t), conformanceBudget, budget.WithInline())
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
		"pinger":               struct{ pinger }{f.Faulty},
		"closer+pinger":        f.Faulty,
		"valuer":               struct{ valuerOnly }{valuerOnly{bareStore{f}, f}},
		"closer+valuer":        struct{ closerValuer }{closerValuer{closerOnly{bareStore{f}}, f}},
		"pinger+valuer":        struct{ pingerValuer }{pingerValuer{f.Faulty, f}},
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
			before := f.ValueCalls.Load()
			set, _, err := sv.SetNXValue(ctx, "k-"+name, []byte("v"), time.Minute)
			require.NoError(t, err, name)
			require.True(t, set, name)
			require.Equal(t, before+1, f.ValueCalls.Load(), "%s: Budget forwards SetNXValue", name)
		}
	}

	// A store that ignores its context is cut off at the budget.
	b := mustBudget(t, f, 30*time.Millisecond).(store.SetNXValuer)
	f.Set(hanging)
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
