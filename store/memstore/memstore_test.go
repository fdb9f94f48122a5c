package memstore_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// scopeOf is the tests' scope function: the text before the second ':'
// ("idem:alice" for "idem:alice:order-1"), or "" without one.
func scopeOf(key string) string {
	first := strings.IndexByte(key, ':')
	if first < 0 {
		return ""
	}
	second := strings.IndexByte(key[first+1:], ':')
	if second < 0 {
		return ""
	}
	return key[:first+1+second]
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

// TestConformanceWithEveryOption runs the conformance suite with each
// option, and with all of them at once. The byte budgets leave each shard
// room for a value of store.MaxValueLen, which the suite stores.
func TestConformanceWithEveryOption(t *testing.T) {
	const roomy = 2 * (store.MaxValueLen + 4096)
	onEvict := memstore.WithOnEvict(func(string) {})
	for name, opts := range map[string][]memstore.Option{
		"WithCapacity":      {memstore.WithCapacity(4096)},
		"WithShards":        {memstore.WithShards(3)},
		"WithSweepInterval": {memstore.WithSweepInterval(time.Millisecond)},
		"WithOnEvict":       {onEvict},
		"WithMaxBytes":      {memstore.WithMaxBytes(roomy)},
		"WithScopeQuota":    {memstore.WithScopeQuota(1000, scopeOf)},
		"all": {
			memstore.WithCapacity(4096), memstore.WithShards(2), memstore.WithSweepInterval(time.Millisecond),
			onEvict, memstore.WithMaxBytes(2 * roomy), memstore.WithScopeQuota(1000, scopeOf),
		},
	} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, opts...) })
		})
	}
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
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		set(t, s, "a", time.Millisecond)
		time.Sleep(10 * time.Millisecond)
		assert.Equal(t, 1, s.Len())
		_, err := s.Get(ctx, "a")
		require.ErrorIs(t, err, store.ErrNotFound)
		assert.Equal(t, 0, s.Len())
	})
}

func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	stores := make([]*memstore.Store, 8)
	for i := range stores {
		var err error
		stores[i], err = memstore.New(memstore.WithSweepInterval(time.Millisecond))
		require.NoError(t, err)
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
	s, err := memstore.New()
	require.NoError(t, err)
	assert.Equal(t, before, runtime.NumGoroutine())
	require.NoError(t, s.Close())
}

func TestOperationsFailAfterClose(t *testing.T) {
	s, err := memstore.New(memstore.WithSweepInterval(time.Millisecond))
	require.NoError(t, err)
	set(t, s, "k", time.Hour)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	requireClosed := func(err error, op string) {
		t.Helper()
		require.ErrorIs(t, err, memstore.ErrClosed, op)
		require.ErrorIs(t, err, store.ErrUnavailable, op)
	}
	_, _, err = s.SetNX(ctx, "k2", []byte("v"), time.Hour)
	requireClosed(err, "SetNX")
	_, err = s.Get(ctx, "k")
	requireClosed(err, "Get")
	_, err = s.CompareAndSwap(ctx, "k", []byte("k"), []byte("v"), time.Hour)
	requireClosed(err, "CompareAndSwap")
	_, err = s.CompareAndDelete(ctx, "k", []byte("k"))
	requireClosed(err, "CompareAndDelete")
	_, err = s.Consume(ctx, "k")
	requireClosed(err, "Consume")
	_, err = s.SetNXBatch(ctx, []store.BatchItem{{Key: "k3", Value: []byte("v"), TTL: time.Hour}})
	requireClosed(err, "SetNXBatch")
	err = s.Scan(ctx, "", func(string, store.Entry) bool { return true })
	requireClosed(err, "Scan") // not an empty store
	assert.Zero(t, s.Len(), "Close drops the entries")
}

// TestCloseRacingOperations closes a store while goroutines use it: every
// operation either completes normally or reports ErrClosed.
func TestCloseRacingOperations(t *testing.T) {
	s, err := memstore.New(memstore.WithSweepInterval(time.Millisecond))
	require.NoError(t, err)
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

// set stores a live value under key, requiring that it was absent.
func set(t *testing.T, s *memstore.Store, key string, ttl time.Duration) {
	t.Helper()
	ok, _, err := s.SetNX(ctx, key, []byte(key), ttl)
	require.NoError(t, err)
	require.True(t, ok, "SetNX(%q)", key)
}

// complete swaps key's value for value, as the engine records a result.
func complete(t *testing.T, s *memstore.Store, key string, value []byte) {
	t.Helper()
	e, err := s.Get(ctx, key)
	require.NoError(t, err)
	ok, err := s.CompareAndSwap(ctx, key, e.Value, value, time.Hour)
	require.NoError(t, err)
	require.True(t, ok, "CompareAndSwap(%q)", key)
}

func TestBytesCountsKeysValuesAndOverhead(t *testing.T) {
	s := newStore(t)
	assert.Zero(t, s.Bytes())
	set(t, s, "key", time.Hour) // value "key"
	assert.Equal(t, int64(3+3+memstore.EntryOverhead), s.Bytes())
	complete(t, s, "key", make([]byte, 100))
	assert.Equal(t, int64(3+100+memstore.EntryOverhead), s.Bytes())
	set(t, s, "other", time.Hour)
	assert.Equal(t, int64(3+100+5+5+2*memstore.EntryOverhead), s.Bytes())
	_, err := s.Consume(ctx, "key")
	require.NoError(t, err)
	ok, err := s.CompareAndDelete(ctx, "other", []byte("other"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, s.Bytes())
}

// TestWriteOverShardBudgetFailsWithErrTooLarge checks that an entry that
// cannot fit in its shard is refused, changing nothing, rather than
// emptying the shard or being kept over budget.
func TestWriteOverShardBudgetFailsWithErrTooLarge(t *testing.T) {
	const budget = 64 << 10
	s := newStore(t, memstore.WithMaxBytes(budget), memstore.WithShards(1))
	set(t, s, "small", time.Hour)
	big := make([]byte, budget)

	_, _, err := s.SetNX(ctx, "big", big, time.Hour)
	require.ErrorIs(t, err, memstore.ErrTooLarge)
	require.ErrorIs(t, err, store.ErrInvalid, "the write changed nothing")
	_, err = s.Get(ctx, "big")
	require.ErrorIs(t, err, store.ErrNotFound)

	ok, err := s.CompareAndSwap(ctx, "small", []byte("small"), big, time.Hour)
	require.ErrorIs(t, err, memstore.ErrTooLarge)
	assert.False(t, ok)
	e, err := s.Get(ctx, "small")
	require.NoError(t, err)
	assert.Equal(t, "small", string(e.Value))
	assert.Zero(t, s.Evictions())
	assert.Equal(t, int64(5+5+memstore.EntryOverhead), s.Bytes())
}

// TestEntryOverheadCoversHeapPerEntry measures the heap an entry takes
// beyond its key and value (kept alive by the test, and sized to an
// allocator class): the byte budget must not undercount it.
func TestEntryOverheadCoversHeapPerEntry(t *testing.T) {
	const n = 50_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "idem:" + strconv.Itoa(i%1000) + ":" + strconv.Itoa(1e9+i)
	}
	value := make([]byte, 64)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := newStore(t, memstore.WithCapacity(2*n), memstore.WithMaxBytes(1<<30)) // shards fill unevenly
	for _, k := range keys {
		set, _, err := s.SetNX(ctx, k, value, time.Hour)
		require.NoError(t, err)
		require.True(t, set)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEntry := float64(after.HeapAlloc-before.HeapAlloc)/n - float64(len(value))
	t.Logf("heap per entry beyond key and value: %.0f bytes; EntryOverhead: %d", perEntry, memstore.EntryOverhead)
	assert.LessOrEqual(t, perEntry, float64(memstore.EntryOverhead))
	assert.Equal(t, n, s.Len())
	runtime.KeepAlive(keys)
}
