package memstore

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExpiryRoundsTTLUp pins the contract's rounding: a TTL that is not a
// whole number of milliseconds is rounded up, never down or dropped. The
// conformance suite cannot see a sub-millisecond difference through a
// real clock.
func TestExpiryRoundsTTLUp(t *testing.T) {
	const now = int64(5 * time.Second)
	for ttl, want := range map[time.Duration]time.Duration{
		time.Nanosecond:                  time.Millisecond,
		999 * time.Microsecond:           time.Millisecond,
		time.Millisecond:                 time.Millisecond,
		1500 * time.Microsecond:          2 * time.Millisecond,
		10*time.Second + time.Nanosecond: 10*time.Second + time.Millisecond,
	} {
		assert.Equal(t, now+int64(want), expiry(now, ttl), "ttl %v", ttl)
	}
	assert.Equal(t, int64(math.MaxInt64), expiry(now, math.MaxInt64))
}

// fill inserts n live entries named prefix0, prefix1, ... into sh.
func fill(t *testing.T, sh *shard, prefix string, n int, expires, now int64) {
	t.Helper()
	for i := range n {
		sh.insert(prefix+strconv.Itoa(i), entry{value: []byte{}, expires: expires}, now)
	}
}

// TestScanIntervalBacksOffAndResets checks the cost bound of makeRoom's
// scans: in a shard full of live entries the interval between scans
// doubles up to 4*capacity, and a scan that reclaims expired entries
// brings it back to capacity/2.
func TestScanIntervalBacksOffAndResets(t *testing.T) {
	const capacity = 8
	var sh shard
	sh.init(capacity)
	require.Equal(t, capacity/2, sh.scanEvery)
	fill(t, &sh, "live", 40*capacity, math.MaxInt64, 0)
	assert.Equal(t, 4*capacity, sh.scanEvery, "interval after scans that found nothing")
	assert.Equal(t, capacity, sh.lru.Len())

	// Half the shard expires at time 10; the LRU entry stays live.
	sh.lru.Purge()
	fill(t, &sh, "old", capacity/2, math.MaxInt64, 0)
	fill(t, &sh, "short", capacity/2, 10, 0)
	sh.sinceScan = sh.scanEvery
	_, didEvict := sh.insert("new", entry{value: []byte{}, expires: math.MaxInt64}, 20)
	assert.False(t, didEvict, "a live entry was evicted while expired ones remained")
	assert.Equal(t, capacity/2, sh.scanEvery, "interval after a scan that reclaimed")
	assert.Equal(t, capacity/2+1, sh.lru.Len())
}
