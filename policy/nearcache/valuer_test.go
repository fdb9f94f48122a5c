package nearcache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// A near cache over a store.SetNXValuer is one too (it used not to be),
// and the engine claims through it: a replay is answered from the cache
// with no round trip, and a miss claims and fills through the store's
// SetNX, whose TTL the cache needs, so the store's SetNXValue is never
// called.
func TestNearCacheReplaysWithoutRoundTripOverAValuer(t *testing.T) {
	f := newFaultyValuer(t)
	nc := mustNear(t, f, idemkit.Settled)
	t.Cleanup(func() { _ = nc.Close() })
	_, isValuer := nc.Store.(store.SetNXValuer)
	require.True(t, isValuer)

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
