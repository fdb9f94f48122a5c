package memstore

import (
	"math"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// entry is a stored value and the monotonic time, in nanoseconds since the
// Store's epoch, at which it expires. value is never modified after it is
// stored (updates store a new slice), so it may be read after the shard
// lock is released.
type entry struct {
	value   []byte
	expires int64
}

// live reports whether e has not expired at now.
func (e entry) live(now int64) bool {
	return now < e.expires
}

// remaining returns e's time to live at now, rounded up to a whole
// millisecond. e must be live.
func (e entry) remaining(now int64) time.Duration {
	left := time.Duration(e.expires - now)
	if left > math.MaxInt64-time.Millisecond {
		return left.Truncate(time.Millisecond)
	}
	return (left + time.Millisecond - 1).Truncate(time.Millisecond)
}

// shard is one independently locked LRU of entries. The padding keeps
// neighbouring shards' locks on separate cache lines.
type shard struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[string, entry]
	capacity int
	// sinceScan counts inserts since makeRoom last scanned for expired
	// entries; it scans again once sinceScan reaches scanEvery.
	sinceScan, scanEvery int
	_                    [24]byte
}

// Bounds of shard.scanEvery, as fractions and multiples of the capacity.
const (
	scanEveryMinDiv = 2 // at least capacity/2 inserts between scans
	scanEveryMaxMul = 4 // at most 4*capacity inserts between scans
)

// init prepares an empty shard holding at most capacity (>= 1) entries.
func (sh *shard) init(capacity int) {
	// simplelru only fails for a size below 1; insert keeps the shard at
	// capacity itself, so the LRU never evicts on its own.
	lru, err := simplelru.NewLRU[string, entry](capacity, nil)
	if err != nil {
		panic("memstore: " + err.Error())
	}
	sh.lru, sh.capacity = lru, capacity
	sh.scanEvery = sh.minScanEvery()
}

// minScanEvery is the shortest interval, in inserts, between two scans
// for expired entries.
func (sh *shard) minScanEvery() int {
	return max(1, sh.capacity/scanEveryMinDiv)
}

// get returns key's entry if it is live at now, marking it recently used.
// An expired entry is removed. The caller holds mu.
func (sh *shard) get(key string, now int64) (entry, bool) {
	e, ok := sh.lru.Get(key)
	if !ok {
		return entry{}, false
	}
	if !e.live(now) {
		sh.lru.Remove(key)
		return entry{}, false
	}
	return e, true
}

// peek is get without marking the entry recently used, for callers about
// to remove it. The caller holds mu.
func (sh *shard) peek(key string, now int64) (entry, bool) {
	e, ok := sh.lru.Peek(key)
	if !ok {
		return entry{}, false
	}
	if !e.live(now) {
		sh.lru.Remove(key)
		return entry{}, false
	}
	return e, true
}

// insert adds key, which must be absent, making room first if the shard is
// full. It returns the key of the live entry it pushed out, if any. The
// caller holds mu.
func (sh *shard) insert(key string, e entry, now int64) (evicted string, didEvict bool) {
	if sh.lru.Len() >= sh.capacity {
		evicted, didEvict = sh.makeRoom(now)
	}
	sh.sinceScan++
	sh.lru.Add(key, e)
	return evicted, didEvict
}

// makeRoom removes at least one entry from the full shard, preferring
// expired entries to live ones: the least recently used entry if it has
// expired; otherwise every expired entry, found by a scan of the shard;
// and only if there is none, the least recently used live entry, whose key
// it returns. The caller holds mu.
//
// Scans are spread over inserts so that their cost stays a small constant
// per insert: at least capacity/2 inserts apart, an interval that doubles
// (up to 4*capacity) after each scan that finds nothing, as in a shard
// full of live entries, and falls back after one that finds something.
func (sh *shard) makeRoom(now int64) (evicted string, didEvict bool) {
	k, old, ok := sh.lru.GetOldest()
	if !ok {
		return "", false
	}
	if !old.live(now) {
		sh.lru.Remove(k)
		return "", false
	}
	if sh.sinceScan >= sh.scanEvery {
		sh.sinceScan = 0
		if sh.removeExpired(sh.lru.Keys(), now) > 0 {
			sh.scanEvery = sh.minScanEvery()
			return "", false
		}
		sh.scanEvery = min(2*sh.scanEvery, scanEveryMaxMul*sh.capacity)
	}
	sh.lru.Remove(k)
	return k, true
}

// removeExpired removes the entries among keys that have expired at now,
// and returns how many it removed. The caller holds mu.
func (sh *shard) removeExpired(keys []string, now int64) int {
	n := 0
	for _, k := range keys {
		if e, ok := sh.lru.Peek(k); ok && !e.live(now) {
			sh.lru.Remove(k)
			n++
		}
	}
	return n
}

// sweep removes the entries among keys that have expired at the time now
// returns. It holds mu for one batch of keys at a time so that operations
// are not stalled behind a long sweep.
func (sh *shard) sweep(keys []string, now func() int64) {
	const batch = 256
	for len(keys) > 0 {
		n := min(batch, len(keys))
		sh.mu.Lock()
		sh.removeExpired(keys[:n], now())
		sh.mu.Unlock()
		keys = keys[n:]
	}
}

// keys returns a snapshot of the shard's keys.
func (sh *shard) keys() []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lru.Keys()
}

// len returns the number of entries, expired or not, the shard holds.
func (sh *shard) len() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lru.Len()
}

// purge drops every entry.
func (sh *shard) purge() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.lru.Purge()
}
