package boltstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/storetest"
)

var ctxb = context.Background()

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openStore(t)
		return s
	})
}

func TestConformanceNoSync(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openStore(t, boltstore.WithNoSync(), boltstore.WithSweepInterval(5*time.Millisecond))
		return s
	})
}

func TestSecondOpenerIsLocked(t *testing.T) {
	_, path := openStore(t)
	s2, err := boltstore.Open(path, boltstore.WithOpenTimeout(50*time.Millisecond))
	require.ErrorIs(t, err, boltstore.ErrLocked)
	require.ErrorIs(t, err, berrors.ErrTimeout)
	require.Contains(t, err.Error(), path)
	require.Nil(t, s2)
}

func TestOpenAfterCloseSucceeds(t *testing.T) {
	s, path := openStore(t)
	require.NoError(t, s.Close())
	s2, err := boltstore.Open(path, boltstore.WithOpenTimeout(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, s2.Close())
}

func TestOpenBadPaths(t *testing.T) {
	dir := t.TempDir()
	_, err := boltstore.Open(filepath.Join(dir, "missing-dir", "x.db"))
	require.Error(t, err)
	require.NotErrorIs(t, err, boltstore.ErrLocked)

	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("not a bolt file "), 1024), 0o600))
	_, err = boltstore.Open(junk)
	require.ErrorIs(t, err, berrors.ErrInvalid)
	require.Contains(t, err.Error(), junk)
}

func TestNewLeavesDBOpen(t *testing.T) {
	db := openDB(t)
	s, err := boltstore.New(db, testBucket)
	require.NoError(t, err)
	mustSetNX(t, s, "k", "v", time.Hour)
	require.NoError(t, s.Close())
	require.NotNil(t, rawGet(t, db, "k"), "the caller's DB stays open and keeps the entry")
}

func TestStoredFormat(t *testing.T) {
	db := openDB(t)
	clock := boltstore.NewFakeClock()
	s := newOver(t, db, boltstore.WithClock(clock.Now))
	mustSetNX(t, s, "k", "value", 1500*time.Microsecond) // rounds up to 2ms
	raw := rawGet(t, db, "k")
	require.Len(t, raw, 9+len("value"))
	require.Equal(t, byte(1), raw[0], "format byte")
	require.Equal(t, clock.Now().UnixMilli()+2, int64(binary.BigEndian.Uint64(raw[1:9])), "expiry in Unix ms")
	require.Equal(t, "value", string(raw[9:]))
}

func TestReopenKeepsEntriesAndTTLs(t *testing.T) {
	clock := boltstore.NewFakeClock()
	s, path := openStore(t, boltstore.WithClock(clock.Now))
	mustSetNX(t, s, "long", "L", 10*time.Second)
	mustSetNX(t, s, "short", "S", time.Second)
	mustSetNX(t, s, "consumed", "C", time.Hour)
	_, err := s.Consume(ctxb, "consumed")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	clock.Advance(2 * time.Second)
	s2, err := boltstore.Open(path, boltstore.WithClock(clock.Now))
	require.NoError(t, err)
	defer s2.Close()
	e, err := s2.Get(ctxb, "long")
	require.NoError(t, err)
	require.Equal(t, store.Entry{Value: []byte("L"), TTL: 8 * time.Second}, e)
	_, err = s2.Get(ctxb, "short")
	require.ErrorIs(t, err, store.ErrNotFound, "an entry that expired while closed must not come back")
	_, err = s2.Get(ctxb, "consumed")
	require.ErrorIs(t, err, store.ErrNotFound)
	n, err := s2.Len(ctxb)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestReopenWithWallClock(t *testing.T) {
	s, path := openStore(t)
	mustSetNX(t, s, "k", "v", time.Hour)
	require.NoError(t, s.Close())
	s2, err := boltstore.Open(path)
	require.NoError(t, err)
	defer s2.Close()
	e, err := s2.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("v"), e.Value)
	require.Positive(t, e.TTL)
	require.LessOrEqual(t, e.TTL, time.Hour)
}

func TestTTLIsExactWithFakeClock(t *testing.T) {
	clock := boltstore.NewFakeClock()
	s, _ := openStore(t, boltstore.WithClock(clock.Now))
	mustSetNX(t, s, "k", "v", 100*time.Millisecond)
	clock.Advance(40*time.Millisecond + 300*time.Microsecond)
	e, err := s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, 59*time.Millisecond, e.TTL, "59.7ms left reports 59ms: rounded down, so a fresh entry never reports more than its TTL")
	clock.Advance(59*time.Millisecond + 699*time.Microsecond)
	e, err = s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, e.TTL, "1µs left still reports 1ms")
	set, existing, err := s.SetNX(ctxb, "k", []byte("w"), time.Hour)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, store.Entry{Value: []byte("v"), TTL: time.Millisecond}, existing)
	clock.Advance(time.Microsecond)
	_, err = s.Get(ctxb, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "expired exactly at its expiry")
}

// An entry written part-way through a millisecond lives at least its whole
// TTL (the write time is rounded up), and reports no more than its TTL.
func TestEntryLivesItsWholeTTL(t *testing.T) {
	clock := boltstore.NewFakeClock()
	clock.Advance(900 * time.Microsecond)
	s, _ := openStore(t, boltstore.WithClock(clock.Now))
	mustSetNX(t, s, "k", "v", 10*time.Millisecond)
	e, err := s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, 10*time.Millisecond, e.TTL)
	clock.Advance(10*time.Millisecond - time.Nanosecond)
	_, err = s.Get(ctxb, "k")
	require.NoError(t, err, "expired before its whole TTL had passed")
}

func TestCorruptEntries(t *testing.T) {
	db := openDB(t)
	s := newOver(t, db)
	garbage := map[string][]byte{
		"empty":   {},
		"short":   {1, 0, 0},
		"version": append([]byte{9, 0, 0, 0, 0, 0, 0, 0, 1}, "v"...),
	}
	for k, v := range garbage {
		rawPut(t, db, k, v)
	}
	mustSetNX(t, s, "good", "v", time.Hour)
	for k, v := range garbage {
		t.Run(k, func(t *testing.T) {
			checkCorrupt := func(op string, err error) {
				t.Helper()
				require.ErrorIs(t, err, store.ErrCorrupt, op)
				require.Contains(t, err.Error(), keyDigest(k), "%s error must identify the key by its digest", op)
				require.NotContains(t, err.Error(), fmt.Sprintf("%q", k), "%s error must not show the raw key", op)
			}
			_, err := s.Get(ctxb, k)
			checkCorrupt("Get", err)
			set, _, err := s.SetNX(ctxb, k, []byte("new"), time.Hour)
			checkCorrupt("SetNX", err)
			require.False(t, set)
			ok, err := s.CompareAndSwap(ctxb, k, []byte("v"), []byte("new"), time.Hour)
			checkCorrupt("CompareAndSwap", err)
			require.False(t, ok)
			ok, err = s.CompareAndDelete(ctxb, k, []byte("v"))
			checkCorrupt("CompareAndDelete", err)
			require.False(t, ok)
			_, err = s.Consume(ctxb, k)
			checkCorrupt("Consume", err)
			require.Equal(t, v, rawGet(t, db, k), "a failed operation must not change the stored bytes")
		})
	}
	_, err := s.Len(ctxb)
	require.ErrorIs(t, err, store.ErrCorrupt)
	removed, err := s.Sweep(ctxb)
	require.NoError(t, err, "the sweeper skips entries it cannot decode")
	require.Zero(t, removed)
	e, err := s.Get(ctxb, "good")
	require.NoError(t, err, "other keys are unaffected")
	require.Equal(t, []byte("v"), e.Value)
}

// TestGroupCommitOneWinnerPerKey races 64 goroutines at the same keys and
// checks that each key has exactly one winner, whose value every loser
// and a later Get see.
func TestGroupCommitOneWinnerPerKey(t *testing.T) {
	const goroutines, keys = 64, 150
	s, _ := openStore(t)
	var wins [keys]atomic.Int32
	var winner [keys]atomic.Value
	losers := make(chan [2]string, goroutines*keys)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			me := fmt.Sprintf("g%d", g)
			for i := range keys {
				k := (i + g*7) % keys // each goroutine starts elsewhere
				set, existing, err := s.SetNX(ctxb, fmt.Sprintf("key-%d", k), []byte(me), time.Hour)
				if !assert.NoError(t, err) {
					return
				}
				if set {
					wins[k].Add(1)
					winner[k].Store(me)
				} else {
					losers <- [2]string{fmt.Sprint(k), string(existing.Value)}
				}
			}
		})
	}
	wg.Wait()
	close(losers)
	for k := range keys {
		require.EqualValues(t, 1, wins[k].Load(), "key-%d must have exactly one winner", k)
		e, err := s.Get(ctxb, fmt.Sprintf("key-%d", k))
		require.NoError(t, err)
		require.Equal(t, winner[k].Load(), string(e.Value))
	}
	for l := range losers {
		var k int
		_, _ = fmt.Sscan(l[0], &k)
		require.Equal(t, winner[k].Load(), l[1], "a loser sees the winner's value")
	}
}

// TestConsumeRaceOneWinner races Consume and CompareAndDelete callers at
// one key per round: exactly one of them succeeds.
func TestConsumeRaceOneWinner(t *testing.T) {
	s, _ := openStore(t)
	for round := range 20 {
		key := fmt.Sprintf("round-%d", round)
		mustSetNX(t, s, key, "v", time.Hour)
		var won atomic.Int32
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				if g%2 == 0 {
					v, err := s.Consume(ctxb, key)
					if err == nil {
						assert.Equal(t, []byte("v"), v)
						won.Add(1)
						return
					}
					assert.ErrorIs(t, err, store.ErrNotFound)
					return
				}
				ok, err := s.CompareAndDelete(ctxb, key, []byte("v"))
				assert.NoError(t, err)
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, won.Load(), "round %d", round)
	}
}

// TestSweeperRemovesExpiredUnderLoad plants 20k expired entries and checks
// that the background sweeper, in small batches, removes them while other
// goroutines keep using the store without errors.
func TestSweeperRemovesExpiredUnderLoad(t *testing.T) {
	const expired = 20_000
	db := openDB(t)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(testBucket))
		if err != nil {
			return err
		}
		past := time.Now().Add(-time.Minute).UnixMilli()
		for i := range expired {
			v := binary.BigEndian.AppendUint64([]byte{1}, uint64(past))
			if err := b.Put(fmt.Appendf(nil, "old-%05d", i), v); err != nil {
				return err
			}
		}
		return nil
	}))
	s := newOver(t, db, boltstore.WithSweepInterval(time.Millisecond), boltstore.WithSweepBatch(100))

	stop := make(chan struct{})
	var ops atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() { churn(t, s, g, stop, &ops) })
	}
	counts := []int{rawCount(t, db)}
	testkit.WaitFor(t, "the sweep to leave only the live entries", func() bool {
		counts = append(counts, rawCount(t, db))
		return counts[len(counts)-1] <= 8*churnKeys
	})
	close(stop)
	wg.Wait()

	n, err := s.Len(ctxb)
	require.NoError(t, err)
	require.Equal(t, 8*churnKeys, n, "only the live entries remain")
	require.Equal(t, 8*churnKeys, rawCount(t, db))
	require.Greater(t, len(counts), 2, "the sweep took several steps")
	require.Less(t, counts[len(counts)-1], counts[0])
	require.Positive(t, ops.Load())
	t.Logf("raw count went %d → %d over %d samples; %d concurrent ops", counts[0], counts[len(counts)-1], len(counts), ops.Load())
}

// churnKeys is the number of live keys each churn goroutine keeps.
const churnKeys = 20

// churn runs SetNX and Get on its own keys until stop is closed, counting
// operations and failing t on any unexpected error.
func churn(t *testing.T, s *boltstore.Store, g int, stop <-chan struct{}, ops *atomic.Int64) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		k := fmt.Sprintf("live-%d-%d", g, i%churnKeys)
		if _, _, err := s.SetNX(ctxb, k, []byte("v"), time.Hour); !assert.NoError(t, err) {
			return
		}
		if _, err := s.Get(ctxb, k); !assert.NoError(t, err) {
			return
		}
		ops.Add(2)
	}
}

func TestSweepOnDemand(t *testing.T) {
	clock := boltstore.NewFakeClock()
	s, _ := openStore(t, boltstore.WithClock(clock.Now), boltstore.WithoutSweeper(), boltstore.WithSweepBatch(7))
	for i := range 100 {
		ttl := time.Second
		if i%4 == 0 {
			ttl = time.Hour
		}
		mustSetNX(t, s, fmt.Sprintf("k%03d", i), "v", ttl)
	}
	removed, err := s.Sweep(ctxb)
	require.NoError(t, err)
	require.Zero(t, removed, "nothing has expired yet")
	clock.Advance(2 * time.Second)
	removed, err = s.Sweep(ctxb)
	require.NoError(t, err)
	require.Equal(t, 75, removed)
	n, err := s.Len(ctxb)
	require.NoError(t, err)
	require.Equal(t, 25, n)
	cancelled, cancel := context.WithCancel(ctxb)
	cancel()
	_, err = s.Sweep(cancelled)
	require.ErrorIs(t, err, context.Canceled)
}

func TestPingAndLen(t *testing.T) {
	s, _ := openStore(t)
	require.NoError(t, s.Ping(ctxb))
	n, err := s.Len(ctxb)
	require.NoError(t, err)
	require.Zero(t, n)
	mustSetNX(t, s, "a", "v", time.Hour)
	n, err = s.Len(ctxb)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestPingMissingBucket(t *testing.T) {
	db := openDB(t)
	s := newOver(t, db)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(testBucket)) }))
	require.ErrorIs(t, s.Ping(ctxb), store.ErrUnavailable)
	_, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Hour)
	require.ErrorIs(t, err, store.ErrUnavailable, "a failed transaction reports ErrUnavailable")
}

func TestClosedStore(t *testing.T) {
	s, _ := openStore(t)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	_, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Hour)
	requireClosed(t, err)
	_, err = s.Get(ctxb, "k")
	requireClosed(t, err)
	_, err = s.CompareAndSwap(ctxb, "k", []byte("v"), []byte("w"), time.Hour)
	requireClosed(t, err)
	_, err = s.CompareAndDelete(ctxb, "k", []byte("v"))
	requireClosed(t, err)
	_, err = s.Consume(ctxb, "k")
	requireClosed(t, err)
	requireClosed(t, s.Ping(ctxb))
	_, err = s.Len(ctxb)
	requireClosed(t, err)
	_, err = s.Sweep(ctxb)
	requireClosed(t, err)
}

func requireClosed(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, boltstore.ErrClosed)
	require.ErrorIs(t, err, store.ErrUnavailable)
}

// TestCloseUnderLoad closes a store while 64 goroutines write to it: each
// call either succeeds or fails with ErrClosed, none hangs, and afterwards
// no goroutine of the store is left.
func TestCloseUnderLoad(t *testing.T) {
	s, _ := openStore(t, boltstore.WithSweepInterval(time.Millisecond))
	var done atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, _, err := s.SetNX(ctxb, fmt.Sprintf("%d-%d", g, i), []byte("v"), time.Hour)
				if err != nil {
					assert.ErrorIs(t, err, boltstore.ErrClosed)
					return
				}
				done.Add(1)
			}
		})
	}
	testkit.WaitFor(t, "500 writes", func() bool { return done.Load() >= 500 })
	require.NoError(t, s.Close())
	wg.Wait()
	// A stopped goroutine is still returning for a moment after its
	// deferred Done lets Close return; one that never ends has leaked:
	// Close must stop every goroutine the store started.
	testkit.WaitFor(t, "every goroutine the store started to end", func() bool { return len(storeGoroutines()) == 0 })
}

// storeGoroutines returns the stacks of goroutines running code of the
// boltstore package.
func storeGoroutines() []string {
	buf := make([]byte, 1<<20)
	for n := runtime.Stack(buf, true); ; n = runtime.Stack(buf, true) {
		if n < len(buf) { // the dump fits: nothing was cut off
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "boltstore.(*Store)") {
			out = append(out, g)
		}
	}
	return out
}

func TestValuesAreCopied(t *testing.T) {
	s, _ := openStore(t)
	v := []byte("abc")
	mustSetNX(t, s, "k", string(v), time.Hour)
	set, _, err := s.SetNX(ctxb, "k2", v, time.Hour)
	require.NoError(t, err)
	require.True(t, set)
	v[0] = 'X'
	e, err := s.Get(ctxb, "k2")
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), e.Value)
	e.Value[0] = 'Y'
	got, err := s.Consume(ctxb, "k2")
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), got)
}

func TestDeadlineWrapsUnavailable(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithDeadline(ctxb, time.Now().Add(-time.Second))
	defer cancel()
	_, _, err := s.SetNX(ctx, "k", []byte("v"), time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, store.ErrUnavailable)
	_, err = s.Get(ctxb, "k")
	require.True(t, errors.Is(err, store.ErrNotFound), "the operation did not run")
}

func mustSetNX(t *testing.T, s *boltstore.Store, key, value string, ttl time.Duration) {
	t.Helper()
	set, _, err := s.SetNX(ctxb, key, []byte(value), ttl)
	require.NoError(t, err)
	require.True(t, set, "SetNX(%q)", key)
}
