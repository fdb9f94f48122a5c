package nearcache_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/nearcache"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// settledS treats values starting with "S" as settled.
func settledS(v []byte) bool { return bytes.HasPrefix(v, []byte("S")) }

func TestNearCacheConformance(t *testing.T) {
	for name, settled := range map[string]func([]byte) bool{
		"CacheEverything": func([]byte) bool { return true },
		"CacheNothing":    func([]byte) bool { return false },
	} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store {
				s := mustNear(t, newMem(t), settled)
				t.Cleanup(func() { _ = s.Close() })
				return s.Store
			})
		})
	}
}

func newNear(t *testing.T, opts ...nearcache.Option) (nearStore, *faultyStore) {
	f := newFaulty(t)
	return mustNear(t, f, settledS, opts...), f
}

func TestNearCacheHitAvoidsRoundTrip(t *testing.T) {
	nc, f := newNear(t)
	set, _, err := nc.SetNX(ctx, "k", []byte("S-done"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	calls := f.Calls.Load()

	set, e, err := nc.SetNX(ctx, "k", []byte("S-other"), time.Minute)
	require.NoError(t, err)
	assert.False(t, set)
	assert.Equal(t, []byte("S-done"), e.Value)
	e2, err := nc.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("S-done"), e2.Value)
	assert.Equal(t, calls, f.Calls.Load(), "answered without the store")

	remote, err := f.Store.Get(ctx, "k")
	require.NoError(t, err)
	assert.LessOrEqual(t, e2.TTL, remote.TTL, "never more TTL than the store")
	assert.Positive(t, e2.TTL)
	assert.Zero(t, e2.TTL%time.Millisecond)
	st := nc.Stats()
	assert.EqualValues(t, 2, st.Hits)
	assert.EqualValues(t, 1, st.Misses)
	assert.Equal(t, 1, st.Entries)
}

func TestNearCacheCachesExistingEntriesItReads(t *testing.T) {
	nc, f := newNear(t)
	_, _, err := f.Store.SetNX(ctx, "k", []byte("S-theirs"), time.Minute)
	require.NoError(t, err)
	set, e, err := nc.SetNX(ctx, "k", []byte("S-mine"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("S-theirs"), e.Value)
	calls := f.Calls.Load()
	e, err = nc.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("S-theirs"), e.Value)
	assert.Equal(t, calls, f.Calls.Load())
}

// The cache never answers "free": a key it does not hold goes to the store.
func TestNearCacheNeverSaysFree(t *testing.T) {
	nc, f := newNear(t)
	// Unsettled: never cached, so a remote delete is seen at once.
	set, _, err := nc.SetNX(ctx, "u", []byte("in-progress"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	_, err = f.Store.Consume(ctx, "u") // deleted through another path
	require.NoError(t, err)
	calls := f.Calls.Load()
	set, _, err = nc.SetNX(ctx, "u", []byte("again"), time.Minute)
	require.NoError(t, err)
	assert.True(t, set, "the store decided")
	assert.Equal(t, calls+1, f.Calls.Load())

	// A key never seen goes to the store, which may say anything.
	_, err = nc.Get(ctx, "never")
	assert.ErrorIs(t, err, store.ErrNotFound)
	f.Set(failing)
	_, _, err = nc.SetNX(ctx, "never", []byte("S"), time.Minute)
	assert.ErrorIs(t, err, store.ErrUnavailable, "a miss is never answered locally")

	// Settled and cached: a remote delete is not seen, and the answer is
	// still "held", never "free".
	f.Set(healthy)
	_, _, err = nc.SetNX(ctx, "s", []byte("S-done"), time.Minute)
	require.NoError(t, err)
	_, err = f.Store.Consume(ctx, "s")
	require.NoError(t, err)
	f.Set(failing)
	set, e, err := nc.SetNX(ctx, "s", []byte("S-new"), time.Minute)
	require.NoError(t, err)
	assert.False(t, set)
	assert.Equal(t, []byte("S-done"), e.Value)
}

func TestNearCacheWritesInvalidate(t *testing.T) {
	ops := map[string]func(nc nearStore) error{
		"CompareAndSwap": func(nc nearStore) error {
			ok, err := nc.CompareAndSwap(ctx, "k", []byte("S-1"), []byte("S-2"), time.Minute)
			if err == nil && !ok {
				err = fmt.Errorf("not swapped")
			}
			return err
		},
		"CompareAndDelete": func(nc nearStore) error {
			ok, err := nc.CompareAndDelete(ctx, "k", []byte("S-1"))
			if err == nil && !ok {
				err = fmt.Errorf("not deleted")
			}
			return err
		},
		"Consume": func(nc nearStore) error {
			_, err := nc.Consume(ctx, "k")
			return err
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			nc, f := newNear(t)
			_, _, err := nc.SetNX(ctx, "k", []byte("S-1"), time.Minute)
			require.NoError(t, err)
			require.Equal(t, 1, nc.Stats().Entries)
			calls := f.Calls.Load()
			require.NoError(t, op(nc))
			assert.Equal(t, calls+1, f.Calls.Load(), "always goes to the store")
			assert.Zero(t, nc.Stats().Entries)
			want, wantErr := f.Store.Get(ctx, "k")
			got, err := nc.Get(ctx, "k")
			assert.Equal(t, calls+2, f.Calls.Load(), "the next read goes to the store")
			assert.Equal(t, wantErr, err)
			assert.Equal(t, want.Value, got.Value)
		})
	}
}

func TestNearCacheRespectsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nc, f := newNear(t)
		_, _, err := nc.SetNX(ctx, "k", []byte("S-done"), 60*time.Millisecond)
		require.NoError(t, err)
		e, err := nc.Get(ctx, "k")
		require.NoError(t, err)
		assert.LessOrEqual(t, e.TTL, 60*time.Millisecond)
		time.Sleep(80 * time.Millisecond)
		calls := f.Calls.Load()
		_, err = nc.Get(ctx, "k")
		assert.ErrorIs(t, err, store.ErrNotFound, "expired: asked the store")
		assert.Equal(t, calls+1, f.Calls.Load())
		set, _, err := nc.SetNX(ctx, "k", []byte("S-next"), time.Minute)
		require.NoError(t, err)
		assert.True(t, set)
	})
}

func TestNewNearCacheRejectsInvalidArguments(t *testing.T) {
	for name, build := range map[string]func() (store.Store, error){
		"nil store":   func() (store.Store, error) { return nearcache.New(nil, settledS) },
		"nil settled": func() (store.Store, error) { return nearcache.New(newMem(t), nil) },
		"capacity 0": func() (store.Store, error) {
			return nearcache.New(newMem(t), settledS, nearcache.WithCapacity(0))
		},
		"max value -1": func() (store.Store, error) {
			return nearcache.New(newMem(t), settledS, nearcache.WithMaxValue(-1))
		},
	} {
		nc, err := build()
		assert.ErrorIs(t, err, store.ErrInvalid, name)
		assert.Nil(t, nc, name)
	}
	_, err := nearcache.New(newMem(t), settledS, nearcache.WithCapacity(-3))
	assert.ErrorContains(t, err, "WithCapacity(-3)", "the error names the option")
	_, err = nearcache.New(newMem(t), settledS, nearcache.WithMaxValue(-1))
	assert.ErrorContains(t, err, "WithMaxValue(-1)")
}

func TestNearCacheBounds(t *testing.T) {
	nc, f := newNear(t, nearcache.WithCapacity(4), nearcache.WithMaxValue(8))
	for i := range 100 {
		_, _, err := nc.SetNX(ctx, fmt.Sprintf("k%d", i), []byte("S-done"), time.Minute)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, nc.Stats().Entries, 4)

	_, _, err := nc.SetNX(ctx, "big", []byte("S-too-large"), time.Minute)
	require.NoError(t, err)
	calls := f.Calls.Load()
	_, err = nc.Get(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, calls+1, f.Calls.Load(), "a value over the cap is not cached")
}

func TestNearCacheCopiesValues(t *testing.T) {
	nc, _ := newNear(t)
	v := []byte("S-done")
	_, _, err := nc.SetNX(ctx, "k", v, time.Minute)
	require.NoError(t, err)
	copy(v, "XXXXXX")
	e, err := nc.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("S-done"), e.Value)
	e.Value[0] = 'Z'
	e, err = nc.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("S-done"), e.Value)
}

func TestNearCacheValidatesBeforeAHit(t *testing.T) {
	nc, _ := newNear(t)
	_, _, err := nc.SetNX(ctx, "k", []byte("S-done"), time.Minute)
	require.NoError(t, err)
	_, _, err = nc.SetNX(ctx, "k", nil, time.Minute)
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, _, err = nc.SetNX(ctx, "k", []byte("v"), 0)
	assert.ErrorIs(t, err, store.ErrInvalid)
}

func TestNearCacheOneWinner(t *testing.T) {
	for round := range 20 {
		nc, _ := newNear(t)
		key := fmt.Sprintf("k%d", round)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				set, e, err := nc.SetNX(ctx, key, []byte("S-done"), time.Minute)
				assert.NoError(t, err)
				if set {
					wins.Add(1)
				} else {
					assert.Equal(t, []byte("S-done"), e.Value)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load())
	}
}

// With the engine's predicate, repeats of a kept Guard claim and of a
// completed Do are answered from the cache.
func TestNearCacheWithEngine(t *testing.T) {
	f := newFaulty(t)
	nc := mustNear(t, f, idemkit.Settled)
	e, _ := newEngine(t, nc.Store)
	run := func(context.Context) error { return nil }
	require.NoError(t, e.Guard(ctx, "req", run))
	calls := f.Calls.Load()
	for range 3 {
		require.ErrorIs(t, e.Guard(ctx, "req", run), idemkit.ErrDuplicate)
	}
	assert.Equal(t, calls, f.Calls.Load(), "duplicates answered locally")

	res, err := e.Do(ctx, "pay", "fp", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	require.False(t, res.Replayed)
	calls = f.Calls.Load()
	res, err = e.Do(ctx, "pay", "fp", func(context.Context) ([]byte, error) { return nil, fmt.Errorf("ran twice") })
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, []byte("ok"), res.Value)
	assert.Equal(t, calls+1, f.Calls.Load(), "the first replay reads the store once")
	_, err = e.Do(ctx, "pay", "fp", func(context.Context) ([]byte, error) { return nil, fmt.Errorf("ran twice") })
	require.NoError(t, err)
	assert.Equal(t, calls+1, f.Calls.Load(), "later replays come from the cache")

	// A releasable Guard claim is not settled: never cached.
	require.NoError(t, e.Guard(ctx, "rel", run, idemkit.WithRelease(idemkit.ReleaseOnDone)))
	calls = f.Calls.Load()
	require.NoError(t, e.Guard(ctx, "rel", run, idemkit.WithRelease(idemkit.ReleaseOnDone)))
	assert.Greater(t, f.Calls.Load(), calls)
}

func TestNearCacheClosesItsStoreOnceAndForwardsPing(t *testing.T) {
	f := &countingCloser{Faulty: newFaulty(t)}
	nc := mustNear(t, f, settledS)
	require.NoError(t, nc.Ping(ctx))
	f.Set(failing)
	require.ErrorIs(t, nc.Ping(ctx), store.ErrUnavailable)
	require.NoError(t, nc.Close())
	require.NoError(t, nc.Close(), "Close is idempotent")
	assert.EqualValues(t, 1, f.Closes.Load(), "the wrapped store is closed once")
	f.Set(healthy)
	_, err := f.Get(ctx, "k")
	assert.ErrorIs(t, err, memstore.ErrClosed)
	// Over a store that cannot ping, the cache cannot either (a Ping that
	// answered nil would report a store nobody checked as healthy).
	_, ok := mustNear(t, bareStore{newMem(t)}, settledS).Store.(store.Pinger)
	assert.False(t, ok, "a near cache over a store without Ping offers Ping")
}

// Readers that keep reading a key through the cache race every delete of
// it: a reader's store call that saw the value before the delete must not
// put it back in the cache afterwards, so once CompareAndDelete or Consume
// has returned, the next read through the cache finds the key free, and
// exactly one of the racing claims that follow wins.
func TestNearCacheDeleteIsNotUndoneByARacingFill(t *testing.T) {
	nc, _ := newNear(t)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = nc.Get(ctx, "k")
			}
		})
	}
	defer func() { close(stop); readers.Wait() }()
	for round := range 300 {
		v := fmt.Appendf(nil, "S-%d", round)
		set, _, err := nc.SetNX(ctx, "k", v, time.Minute)
		require.NoError(t, err)
		require.True(t, set, "round %d: the key was free", round)
		if round%2 == 0 {
			ok, err := nc.CompareAndDelete(ctx, "k", v)
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			got, err := nc.Consume(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, v, got)
		}
		_, err = nc.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound, "round %d: a deleted key answered held from the cache", round)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				set, _, err := nc.SetNX(ctx, "w", fmt.Appendf(nil, "S-%d-%d", round, i), time.Minute)
				assert.NoError(t, err)
				if set {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", round)
		_, err = nc.Consume(ctx, "w")
		require.NoError(t, err)
	}
}
