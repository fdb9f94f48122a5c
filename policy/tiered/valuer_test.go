package tiered_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// Tiered runs the SetNXValue cases of the conformance suite on a real
// Redis (redisstore on Redis 7.0 claims with one SET NX PX GET).
func TestTieredSetNXValueConformanceOverRedis(t *testing.T) {
	client := redistest.Start(t).Client(t)
	var n atomic.Int64
	redis := func(t *testing.T) store.Store {
		s, err := redisstore.New(client, redisstore.WithPrefix("v"+strconv.FormatInt(n.Add(1), 10)+":"))
		require.NoError(t, err)
		return s
	}
	t.Run("Tiered", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			s := mustTiered(t, redis(t), newMem(t))
			t.Cleanup(func() { _ = s.Close() })
			return s.Store
		})
	})
}

// Tiered's SetNXValue goes to the primary's SetNXValue while the breaker
// is closed, to the fallback (journaled, then copied forward) while it is
// open, and to the fallback's SetNX when it has no SetNXValue.
func TestTieredSetNXValue(t *testing.T) {
	p, f := newFaultyValuer(t), newFaulty(t)
	s := mustTiered(t, p, f, tiered.WithFailureThreshold(1), tiered.WithCoolDown(20*time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })

	set, _, err := s.SetNXValue(ctx, "closed", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	assert.EqualValues(t, 1, p.ValueCalls.Load(), "the primary's SetNXValue")
	assert.Zero(t, f.Calls.Load())
	set, v, err := s.SetNXValue(ctx, "closed", []byte("w"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	assert.Equal(t, []byte("v"), v)

	p.Set(failing)
	_, _, err = s.SetNXValue(ctx, "lost", []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable, "the primary's failure is returned, not applied to the fallback")
	require.Equal(t, tiered.BreakerOpen, s.State())

	set, _, err = s.SetNXValue(ctx, "outage", []byte("mine"), time.Minute)
	require.NoError(t, err)
	require.True(t, set, "the fallback (SetNX) took the claim")
	set, v, err = s.SetNXValue(ctx, "outage", []byte("other"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	assert.Equal(t, []byte("mine"), v)
	assert.Equal(t, 1, s.Stats().Journal)

	p.Set(healthy)
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.State() == tiered.BreakerClosed && s.Stats().Journal == 0
	}, hangDetector, 5*time.Millisecond)
	e, err := p.Store.Get(ctx, "outage")
	require.NoError(t, err)
	assert.Equal(t, []byte("mine"), e.Value, "the outage claim was copied forward")
	set, v, err = s.SetNXValue(ctx, "outage", []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	assert.Equal(t, []byte("mine"), v)

	// Over a primary without SetNXValue, the tiered store has none either
	// (it used to offer one that ran SetNX): the engine claims with SetNX.
	bare := newFaulty(t)
	s2 := mustTiered(t, bare, newFaultyValuer(t))
	t.Cleanup(func() { _ = s2.Close() })
	_, ok := s2.Store.(store.SetNXValuer)
	assert.False(t, ok, "a tiered store over a primary without SetNXValue offers it")
}

func TestTieredSetNXValueOneWinnerDuringOutage(t *testing.T) {
	p, f := newFaultyValuer(t), newFaulty(t)
	s := mustTiered(t, p, f, tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Hour))
	t.Cleanup(func() { _ = s.Close() })
	openBreaker(t, s, p.Faulty)
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
