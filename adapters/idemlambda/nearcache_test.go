package idemlambda_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
	"github.com/idemkit/idemkit/policy/nearcache"
	"github.com/idemkit/idemkit/store"
)

// reads counts the calls that reach a store.
type reads struct {
	store.Store
	n atomic.Int64
}

func (r *reads) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	r.n.Add(1)
	return r.Store.SetNX(ctx, key, value, ttl)
}

func (r *reads) Get(ctx context.Context, key string) (store.Entry, error) {
	r.n.Add(1)
	return r.Store.Get(ctx, key)
}

// With the engine over a near cache, built once as a function's init
// does, warm invocations answer a completed key from memory once one
// replay has read it: no store call. The cache is bounded: past its capacity the least recently used
// key goes back to the store.
func TestNearCacheAcrossWarmInvocations(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			backing := &reads{Store: o.open(t)}
			near, err := nearcache.New(backing, idemkit.Settled, nearcache.WithCapacity(1))
			require.NoError(t, err)
			c := &counter{}
			h, err := idemlambda.Wrap(engineOn(t, near), "orders", c.handle, idemlambda.WithKeyPath("orderId"))
			require.NoError(t, err)
			ctx := context.Background()
			invoke := func(id string) receipt {
				r, err := h(ctx, order{OrderID: id})
				require.NoError(t, err)
				return r
			}
			first := invoke("o-1")
			require.Equal(t, first, invoke("o-1")) // a replay from the store fills the cache
			before := backing.n.Load()
			for range 5 {
				require.Equal(t, first, invoke("o-1"))
			}
			require.Equal(t, before, backing.n.Load(), "warm repeats reached the store")
			stats, _ := nearcache.StatsOf(near)
			require.GreaterOrEqual(t, stats.Hits, uint64(5))

			invoke("o-2")
			invoke("o-2") // its replay pushes o-1 out of a cache of one
			stats, _ = nearcache.StatsOf(near)
			require.LessOrEqual(t, stats.Entries, 1)
			before = backing.n.Load()
			require.Equal(t, first, invoke("o-1"))
			require.Greater(t, backing.n.Load(), before, "an evicted key must go to the store")
			require.EqualValues(t, 2, c.runs.Load())
		})
	}
}
