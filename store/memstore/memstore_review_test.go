package memstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store/memstore"
)

// TestFullShardReclaimsExpiredBeforeEvictingLive fills a shard whose least
// recently used entry is live while newer entries have expired: making
// room must reclaim an expired entry, not push out the live one (a lost
// claim or record that nothing required losing).
func TestFullShardReclaimsExpiredBeforeEvictingLive(t *testing.T) {
	var evicted []string
	s := newStore(t, memstore.WithCapacity(3), memstore.WithShards(1),
		memstore.WithOnEvict(func(key string) { evicted = append(evicted, key) }))
	set(t, s, "record", time.Hour) // long-lived, least recently used
	set(t, s, "a", 10*time.Millisecond)
	set(t, s, "b", 10*time.Millisecond)
	time.Sleep(30 * time.Millisecond) // a and b have expired; record has not

	set(t, s, "c", time.Hour)
	set(t, s, "d", time.Hour)

	assert.Zero(t, s.Evictions(), "a live entry was evicted while expired ones held its place")
	assert.Empty(t, evicted)
	_, err := s.Get(ctx, "record")
	require.NoError(t, err)
	assert.Equal(t, 3, s.Len())

	set(t, s, "e", time.Hour) // every entry is live: the LRU one, c, goes
	assert.Equal(t, uint64(1), s.Evictions())
	assert.Equal(t, []string{"c"}, evicted)
}
