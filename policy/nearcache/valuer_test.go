package nearcache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// NearCache is not a store.SetNXValuer: it needs the TTL of what it
// caches, and a cached replay makes no round trip either way. The engine
// over it claims with SetNX: a replay is answered from the cache, and a
// miss fills it from the store's SetNX.
func TestNearCacheReplaysWithoutRoundTripOverAValuer(t *testing.T) {
	f := newFaultyValuer(t)
	nc := mustNear(t, f, idemkit.Settled)
	t.Cleanup(func() { _ = nc.Close() })
	_, isValuer := nc.Store.(store.SetNXValuer)
	require.False(t, isValuer)

	e, err := idemkit.New(nc.Store, idemkit.WithObserver(nil))
	require.NoError(t, err)
	fn := func(context.Context) ([]byte, error) { return []byte("r"), nil }
	_, err = e.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)

	// Another instance's cache: its first replay misses and fills.
	nc2 := mustNear(t, f, idemkit.Settled)
	e2, err := idemkit.New(nc2.Store, idemkit.WithObserver(nil))
	require.NoError(t, err)
	res, err := e2.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	calls := f.Calls.Load()
	for range 10 {
		res, err = e2.Do(ctx, "k", "fp", fn)
		require.NoError(t, err)
		require.True(t, res.Replayed)
		require.Equal(t, []byte("r"), res.Value)
	}
	assert.Equal(t, calls, f.Calls.Load(), "cached replays make no store call")
	assert.Zero(t, f.ValueCalls.Load())
}
