package memstore

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestExpiryInstant pins the liveness rule at the exact instant an entry
// expires: live one nanosecond before, absent at the instant itself. The
// contract says a TTL of d means the entry is gone d after it was written,
// so an entry still answering at its expiry time would outlive its TTL.
func TestExpiryInstant(t *testing.T) {
	t.Run("node", func(t *testing.T) {
		n := &node{expires: 1000}
		assert.True(t, n.live(999), "live a nanosecond before its expiry")
		assert.False(t, n.live(1000), "live at its expiry instant")
		assert.False(t, n.live(1001))
	})
	t.Run("shard", func(t *testing.T) {
		var sh shard
		sh.init(8, 1<<20, 0)
		_, err := sh.insert("k", "", []byte("v"), 1000, 0, nil)
		require.NoError(t, err)
		assert.NotNil(t, sh.get("k", 999), "found a nanosecond before its expiry")
		assert.Nil(t, sh.get("k", 1000), "found at its expiry instant")
		assert.Empty(t, sh.nodes, "the expired entry was not reclaimed")
	})
	// Through the Store's own clock, advanced exactly by synctest's fake
	// time: every operation sees the entry gone at the instant its TTL
	// ends.
	t.Run("store", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			s, err := New(WithCapacity(16))
			require.NoError(t, err)
			defer s.Close()
			const ttl = time.Second
			set, _, err := s.SetNX(ctx, "k", []byte("v"), ttl)
			require.NoError(t, err)
			require.True(t, set)
			time.Sleep(ttl - time.Nanosecond)
			ent, err := s.Get(ctx, "k")
			require.NoError(t, err, "absent a nanosecond before its expiry")
			assert.Equal(t, time.Millisecond, ent.TTL, "remaining time rounds up")
			time.Sleep(time.Nanosecond)
			_, err = s.Get(ctx, "k")
			assert.True(t, errors.Is(err, store.ErrNotFound), "Get at the expiry instant: %v", err)
			set, _, err = s.SetNX(ctx, "k", []byte("w"), ttl)
			require.NoError(t, err)
			assert.True(t, set, "SetNX at the expiry instant found the old entry")
		})
	})
}
