package memstore_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

func TestEvictsLeastRecentlyUsedLiveEntry(t *testing.T) {
	var mu sync.Mutex
	var evicted []string
	s := newStore(t, memstore.WithCapacity(3), memstore.WithShards(1), memstore.WithOnEvict(func(key string) {
		mu.Lock()
		defer mu.Unlock()
		evicted = append(evicted, key)
	}))
	for _, k := range []string{"a", "b", "c"} {
		set(t, s, k, time.Hour)
	}
	_, err := s.Get(ctx, "a") // a becomes most recently used
	require.NoError(t, err)
	set(t, s, "d", time.Hour)
	set(t, s, "e", time.Hour)

	assert.Equal(t, uint64(2), s.Evictions())
	assert.Equal(t, []string{"b", "c"}, evicted)
	assert.Equal(t, 3, s.Len())
	for _, k := range []string{"a", "d", "e"} {
		_, err := s.Get(ctx, k)
		assert.NoError(t, err, k)
	}
}

func TestExpiredEntriesAreNotEvictions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		s := newStore(t, memstore.WithCapacity(2), memstore.WithShards(1), memstore.WithOnEvict(func(string) { calls.Add(1) }))
		set(t, s, "a", 20*time.Millisecond)
		set(t, s, "b", 20*time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		set(t, s, "c", time.Hour) // reclaims expired a to make room
		_, err := s.Get(ctx, "b") // reclaims expired b on access
		require.ErrorIs(t, err, store.ErrNotFound)
		set(t, s, "d", time.Hour)

		assert.Zero(t, s.Evictions())
		assert.Zero(t, calls.Load())
		assert.Equal(t, 2, s.Len())
	})
}

func TestDeletesAreNotEvictions(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(2), memstore.WithShards(1))
	set(t, s, "a", time.Hour)
	set(t, s, "b", time.Hour)
	_, err := s.Consume(ctx, "a")
	require.NoError(t, err)
	ok, err := s.CompareAndDelete(ctx, "b", []byte("b"))
	require.NoError(t, err)
	require.True(t, ok)
	set(t, s, "c", time.Hour)
	set(t, s, "d", time.Hour)
	assert.Zero(t, s.Evictions())
	assert.Equal(t, 2, s.Len())
}

func TestOnEvictMayCallTheStore(t *testing.T) {
	var s *memstore.Store
	var seen []error
	s = newStore(t, memstore.WithCapacity(1), memstore.WithShards(1), memstore.WithOnEvict(func(key string) {
		_, err := s.Get(ctx, key)
		seen = append(seen, err)
	}))
	set(t, s, "a", time.Hour)
	set(t, s, "b", time.Hour)
	require.Len(t, seen, 1)
	assert.ErrorIs(t, seen[0], store.ErrNotFound)
}

func TestCapacityIsSplitAcrossShards(t *testing.T) {
	const capacity, inserts = 100, 2000
	s := newStore(t, memstore.WithCapacity(capacity), memstore.WithShards(4))
	for i := range inserts {
		set(t, s, strconv.Itoa(i), time.Hour)
	}
	assert.Equal(t, capacity, s.Len())
	assert.Equal(t, uint64(inserts-capacity), s.Evictions())
}

// TestConcurrentEvictionCount inserts fresh keys from many goroutines into
// a small store: every successful SetNX either still holds its entry or
// was counted as an eviction, and each eviction was reported once.
func TestConcurrentEvictionCount(t *testing.T) {
	const workers, perWorker = 16, 500
	var reported atomic.Uint64
	s := newStore(t, memstore.WithCapacity(64), memstore.WithShards(4), memstore.WithOnEvict(func(string) { reported.Add(1) }))
	var wg sync.WaitGroup
	var inserted atomic.Uint64
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				ok, _, err := s.SetNX(ctx, strconv.Itoa(w)+":"+strconv.Itoa(i), []byte("v"), time.Hour)
				if assert.NoError(t, err) && ok {
					inserted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, uint64(workers*perWorker), inserted.Load())
	assert.Equal(t, 64, s.Len())
	assert.Equal(t, inserted.Load()-64, s.Evictions())
	assert.Equal(t, s.Evictions(), reported.Load())
}

// TestFullShardReclaimsExpiredBeforeEvictingLive fills a shard whose least
// recently used entry is live while newer entries have expired: making
// room must reclaim an expired entry, not push out the live one (a lost
// claim or record that nothing required losing).
func TestFullShardReclaimsExpiredBeforeEvictingLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// evictLog records the keys WithOnEvict reports.
type evictLog struct {
	mu   sync.Mutex
	keys []string
}

func (l *evictLog) option() memstore.Option {
	return memstore.WithOnEvict(func(key string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.keys = append(l.keys, key)
	})
}

func (l *evictLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// TestClaimsDoNotEvictSwappedEntries pins the admission rule: an entry
// rewritten by CompareAndSwap is evicted to make room only when no entry
// that was never rewritten is left.
func TestClaimsDoNotEvictSwappedEntries(t *testing.T) {
	var log evictLog
	s := newStore(t, memstore.WithCapacity(3), memstore.WithShards(1), log.option())
	set(t, s, "a", time.Hour)
	complete(t, s, "a", []byte("done")) // a is the oldest entry, but protected
	set(t, s, "b", time.Hour)
	set(t, s, "c", time.Hour)
	set(t, s, "d", time.Hour) // b: the least recently used unprotected entry
	set(t, s, "e", time.Hour) // c
	assert.Equal(t, []string{"b", "c"}, log.snapshot())

	complete(t, s, "d", []byte("done"))
	complete(t, s, "e", []byte("done"))
	set(t, s, "f", time.Hour) // only protected entries left: the LRU one, a
	assert.Equal(t, []string{"b", "c", "a"}, log.snapshot())
	assert.Equal(t, uint64(3), s.Evictions())
}

// flood stores 100 completed records in scope idem:victim, then 20,000
// junk keys in scope idem:mallory, every other one completed if
// completeJunk, and returns how many victim records a retry still finds.
func flood(t *testing.T, s *memstore.Store, completeJunk bool) (kept int) {
	t.Helper()
	const victims, junk = 100, 20_000
	for i := range victims {
		key := "idem:victim:" + strconv.Itoa(i)
		set(t, s, key, time.Minute)
		complete(t, s, key, []byte("done"))
	}
	for i := range junk {
		key := "idem:mallory:" + strconv.Itoa(i)
		set(t, s, key, time.Minute)
		if completeJunk && i%2 == 1 {
			complete(t, s, key, []byte("done"))
		}
	}
	for i := range victims {
		set, e, err := s.SetNX(ctx, "idem:victim:"+strconv.Itoa(i), []byte("retry"), time.Minute)
		require.NoError(t, err)
		if !set && string(e.Value) == "done" {
			kept++
		}
	}
	t.Logf("victim records kept: %d of %d; evictions: %d", kept, victims, s.Evictions())
	return kept
}

// TestFloodOfClaimsKeepsOtherCompletedRecords is issue 11's case: 20,000
// junk claims from one principal used to evict another's completed
// records (0 of 100 kept), whose retries then ran again.
func TestFloodOfClaimsKeepsOtherCompletedRecords(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(10_000))
	assert.Equal(t, 100, flood(t, s, false))
}

// TestScopeQuotaKeepsOtherScopesUnderFlood floods with completed junk,
// which the admission rule alone does not hold back: the quota does, and
// every eviction falls on the flooding scope.
func TestScopeQuotaKeepsOtherScopesUnderFlood(t *testing.T) {
	var log evictLog
	s := newStore(t, memstore.WithCapacity(10_000), memstore.WithShards(4),
		memstore.WithScopeQuota(1000, scopeOf), log.option())
	assert.Equal(t, 100, flood(t, s, true))
	evicted := log.snapshot()
	assert.Len(t, evicted, 20_000-1000)
	for _, k := range evicted {
		require.True(t, strings.HasPrefix(k, "idem:mallory:"), "evicted %q", k)
	}
}

// TestScopeQuotaEvictsOnlyWithinScope checks that a scope at its quota
// evicts its own least recently used unprotected entry, never another
// scope's, and that keys without a scope have no quota.
func TestScopeQuotaEvictsOnlyWithinScope(t *testing.T) {
	var log evictLog
	s := newStore(t, memstore.WithCapacity(100), memstore.WithShards(1),
		memstore.WithScopeQuota(3, scopeOf), log.option())
	for _, k := range []string{"idem:a:1", "idem:b:1", "idem:a:2", "idem:b:2", "idem:a:3"} {
		set(t, s, k, time.Hour)
	}
	complete(t, s, "idem:a:1", []byte("done"))
	set(t, s, "idem:a:4", time.Hour) // a:2, not a:1 (protected) nor any of b
	set(t, s, "idem:a:5", time.Hour) // a:3
	assert.Equal(t, []string{"idem:a:2", "idem:a:3"}, log.snapshot())
	for _, k := range []string{"idem:a:1", "idem:b:1", "idem:b:2", "idem:a:4", "idem:a:5"} {
		_, err := s.Get(ctx, k)
		assert.NoError(t, err, k)
	}
	for i := range 10 {
		set(t, s, "unscoped"+strconv.Itoa(i), time.Hour)
	}
	assert.Equal(t, uint64(2), s.Evictions())
	assert.Equal(t, 15, s.Len())
}

// TestScopeQuotaReclaimsExpiredBeforeEvicting checks that a scope at its
// quota reclaims its own expired entries before evicting a live one.
func TestScopeQuotaReclaimsExpiredBeforeEvicting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, memstore.WithCapacity(100), memstore.WithShards(1), memstore.WithScopeQuota(3, scopeOf))
		set(t, s, "idem:a:live", time.Hour) // the least recently used
		set(t, s, "idem:a:1", 10*time.Millisecond)
		set(t, s, "idem:a:2", 10*time.Millisecond)
		time.Sleep(30 * time.Millisecond)
		set(t, s, "idem:a:3", time.Hour)
		set(t, s, "idem:a:4", time.Hour)
		assert.Zero(t, s.Evictions())
		_, err := s.Get(ctx, "idem:a:live")
		require.NoError(t, err)
	})
}

// TestScopeQuotaRace floods one scope from 32 goroutines while 32 others
// keep their own keys in another: no key of the second scope is evicted,
// and the flooding scope never holds more than its quota.
func TestScopeQuotaRace(t *testing.T) {
	const quota, perWorker = 50, 200
	var log evictLog
	s := newStore(t, memstore.WithCapacity(1000), memstore.WithShards(4),
		memstore.WithScopeQuota(quota, scopeOf), log.option())
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range perWorker {
				key := "idem:flood:" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if w%2 == 1 {
					key = "idem:quiet:" + strconv.Itoa(w) // within its quota of 50
				}
				_, _, err := s.SetNX(ctx, key, []byte("v"), time.Hour)
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	held := 0
	for w := 0; w < 64; w += 2 {
		for i := range perWorker {
			if _, err := s.Get(ctx, "idem:flood:"+strconv.Itoa(w)+"-"+strconv.Itoa(i)); err == nil {
				held++
			}
		}
	}
	assert.Equal(t, quota, held)
	for _, k := range log.snapshot() {
		require.True(t, strings.HasPrefix(k, "idem:flood:"), "evicted %q", k)
	}
	assert.Equal(t, uint64(32*perWorker-quota), s.Evictions())
	assert.Equal(t, quota+32, s.Len())
}

// TestSwapThatGrowsEvictsOthersNotItself checks that a value grown by
// CompareAndSwap over the byte budget makes room by evicting other
// entries, unprotected first.
func TestSwapThatGrowsEvictsOthersNotItself(t *testing.T) {
	const small = 1 + 1 + memstore.EntryOverhead // key and value of 1 byte
	const budget = 4*small + small/2             // four small entries fit
	var log evictLog
	s := newStore(t, memstore.WithMaxBytes(budget), memstore.WithShards(1), log.option())
	for _, k := range []string{"a", "b", "c", "d"} {
		set(t, s, k, time.Hour)
	}
	complete(t, s, "a", []byte("A"))
	// d grows by 2*small bytes: b and c, not the protected a, make room.
	complete(t, s, "d", make([]byte, 1+2*small))
	assert.Equal(t, []string{"b", "c"}, log.snapshot())
	assert.LessOrEqual(t, s.Bytes(), int64(budget))
	for _, k := range []string{"a", "d"} {
		_, err := s.Get(ctx, k)
		assert.NoError(t, err, k)
	}
}

// TestByteBoundHoldsUnderRace writes values of many sizes from 64
// goroutines, growing and deleting some, while a reader polls Bytes: the
// budget is never exceeded, and afterwards Bytes equals the cost of the
// entries present, counted by the test itself.
func TestByteBoundHoldsUnderRace(t *testing.T) {
	const budget, workers, perWorker = 256 << 10, 64, 100
	s := newStore(t, memstore.WithMaxBytes(budget), memstore.WithShards(4))
	done := make(chan struct{})
	var peak atomic.Int64
	var poll sync.WaitGroup
	poll.Go(func() {
		for {
			peak.Store(max(peak.Load(), s.Bytes()))
			select {
			case <-done:
				return
			default:
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := strconv.Itoa(w) + ":" + strconv.Itoa(i)
				value := make([]byte, (w*perWorker+i)%4096)
				set, _, err := s.SetNX(ctx, key, value, time.Hour)
				if !assert.NoError(t, err) || !set {
					continue
				}
				switch i % 3 {
				case 1:
					_, err = s.CompareAndSwap(ctx, key, value, make([]byte, len(value)+1000), time.Hour)
				case 2:
					_, err = s.Consume(ctx, key)
				}
				if err != nil {
					assert.ErrorIs(t, err, store.ErrNotFound) // evicted meanwhile
				}
			}
		})
	}
	wg.Wait()
	close(done)
	poll.Wait()
	assert.LessOrEqual(t, peak.Load(), int64(budget))
	assert.Positive(t, s.Evictions(), "the test must push the store to its budget")

	var counted int64
	present := 0
	for w := range workers {
		for i := range perWorker {
			key := strconv.Itoa(w) + ":" + strconv.Itoa(i)
			if e, err := s.Get(ctx, key); err == nil {
				counted += int64(len(key)+len(e.Value)) + memstore.EntryOverhead
				present++
			}
		}
	}
	assert.Equal(t, counted, s.Bytes())
	assert.Equal(t, present, s.Len())
}

// TestOnEvictPanicIsRecovered checks that a panicking eviction callback
// does not fail the write that evicted: the write has taken effect, and a
// caller that never learns so (an engine claim) would leave its key held.
func TestOnEvictPanicIsRecovered(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(1), memstore.WithShards(1),
		memstore.WithOnEvict(func(string) { panic("observer bug") }))
	set(t, s, "a", time.Hour)
	var (
		ok  bool
		err error
	)
	require.NotPanics(t, func() { ok, _, err = s.SetNX(ctx, "b", []byte("v"), time.Hour) })
	require.NoError(t, err)
	assert.True(t, ok, "the write that evicted a is reported")
	assert.Equal(t, uint64(1), s.Evictions())
}
