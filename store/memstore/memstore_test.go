package memstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

var ctx = context.Background()

// newStore returns a Store closed when the test ends.
func newStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	s := memstore.New(opts...)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestConformanceSmallWithJanitor(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return newStore(t, memstore.WithCapacity(4096), memstore.WithShards(2), memstore.WithSweepInterval(time.Millisecond))
	})
}

// set stores a live value under key, requiring that it was absent.
func set(t *testing.T, s *memstore.Store, key string, ttl time.Duration) {
	t.Helper()
	ok, _, err := s.SetNX(ctx, key, []byte(key), ttl)
	require.NoError(t, err)
	require.True(t, ok, "SetNX(%q)", key)
}

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

func TestJanitorRemovesExpiredEntries(t *testing.T) {
	s := newStore(t, memstore.WithSweepInterval(5*time.Millisecond), memstore.WithShards(4))
	for i := range 1000 {
		set(t, s, strconv.Itoa(i), 10*time.Millisecond)
	}
	set(t, s, "live", time.Hour)
	require.Eventually(t, func() bool { return s.Len() == 1 }, 5*time.Second, 5*time.Millisecond,
		"janitor left expired entries")
	_, err := s.Get(ctx, "live")
	require.NoError(t, err)
	assert.Zero(t, s.Evictions())
}

func TestWithoutJanitorExpiredEntriesStayUntilTouched(t *testing.T) {
	s := newStore(t)
	set(t, s, "a", time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	assert.Equal(t, 1, s.Len())
	_, err := s.Get(ctx, "a")
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, 0, s.Len())
}

func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	stores := make([]*memstore.Store, 8)
	for i := range stores {
		stores[i] = memstore.New(memstore.WithSweepInterval(time.Millisecond))
	}
	require.Greater(t, runtime.NumGoroutine(), before, "janitors did not start")
	for _, s := range stores {
		require.NoError(t, s.Close())
	}
	requireGoroutinesAtMost(t, before)
}

// requireGoroutinesAtMost waits up to 5 s for the goroutine count to drop
// to n. It polls on the test goroutine: testify's Eventually would add a
// goroutine of its own to the count.
func requireGoroutinesAtMost(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines still running after Close, want <= %d:\n%s",
				runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNoJanitorStartsNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	s := memstore.New()
	assert.Equal(t, before, runtime.NumGoroutine())
	require.NoError(t, s.Close())
}

func TestOperationsFailAfterClose(t *testing.T) {
	s := memstore.New(memstore.WithSweepInterval(time.Millisecond))
	set(t, s, "k", time.Hour)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	requireClosed := func(err error, op string) {
		t.Helper()
		require.ErrorIs(t, err, memstore.ErrClosed, op)
		require.ErrorIs(t, err, store.ErrUnavailable, op)
	}
	_, _, err := s.SetNX(ctx, "k2", []byte("v"), time.Hour)
	requireClosed(err, "SetNX")
	_, err = s.Get(ctx, "k")
	requireClosed(err, "Get")
	_, err = s.CompareAndSwap(ctx, "k", []byte("k"), []byte("v"), time.Hour)
	requireClosed(err, "CompareAndSwap")
	_, err = s.CompareAndDelete(ctx, "k", []byte("k"))
	requireClosed(err, "CompareAndDelete")
	_, err = s.Consume(ctx, "k")
	requireClosed(err, "Consume")
	assert.Zero(t, s.Len(), "Close drops the entries")
}

// TestCloseRacingOperations closes a store while goroutines use it: every
// operation either completes normally or reports ErrClosed.
func TestCloseRacingOperations(t *testing.T) {
	s := memstore.New(memstore.WithSweepInterval(time.Millisecond))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				_, _, err := s.SetNX(ctx, strconv.Itoa(w*1000+i), []byte("v"), time.Millisecond)
				if err != nil {
					assert.ErrorIs(t, err, memstore.ErrClosed)
					return
				}
			}
		})
	}
	require.NoError(t, s.Close())
	wg.Wait()
}

func TestGetAllocatesOnlyTheCopy(t *testing.T) {
	s := newStore(t)
	set(t, s, "k", time.Hour)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0)
}

func TestRemainingTTLRoundsUpToMilliseconds(t *testing.T) {
	s := newStore(t)
	ok, _, err := s.SetNX(ctx, "k", []byte("v"), 2*time.Millisecond+time.Nanosecond)
	require.NoError(t, err)
	require.True(t, ok)
	e, err := s.Get(ctx, "k")
	if err != nil { // the 3 ms rounded TTL already ran out
		require.ErrorIs(t, err, store.ErrNotFound)
		return
	}
	assert.Contains(t, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}, e.TTL)
}

func TestMaximalTTLNeverExpires(t *testing.T) {
	s := newStore(t)
	ok, _, err := s.SetNX(ctx, "k", []byte("v"), time.Duration(1<<63-1))
	require.NoError(t, err)
	require.True(t, ok)
	e, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Greater(t, e.TTL, 100*365*24*time.Hour)
	assert.Zero(t, e.TTL%time.Millisecond)
}
