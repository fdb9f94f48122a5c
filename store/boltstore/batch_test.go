package boltstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

var _ store.Batcher = (*boltstore.Store)(nil)

// item returns a BatchItem.
func item(key, value string, ttl time.Duration) store.BatchItem {
	return store.BatchItem{Key: key, Value: []byte(value), TTL: ttl}
}

// lastTxID returns the ID of db's last committed write transaction.
func lastTxID(t *testing.T, db *bolt.DB) int {
	t.Helper()
	var id int
	require.NoError(t, db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

func TestSetNXBatchMixedKeys(t *testing.T) {
	db := openDB(t)
	clock := boltstore.NewFakeClock()
	s := newOver(t, db, boltstore.WithClock(clock.Now), boltstore.WithoutSweeper())
	mustSetNX(t, s, "expired", "old", time.Second)
	clock.Advance(2 * time.Second)
	mustSetNX(t, s, "held", "holder", time.Minute)
	clock.Advance(10 * time.Second)
	before := lastTxID(t, db)

	res, err := s.SetNXBatch(ctxb, []store.BatchItem{
		item("new", "a", time.Hour),
		item("held", "b", time.Hour),
		item("expired", "c", 1500*time.Microsecond),
	})
	require.NoError(t, err)
	require.Equal(t, []store.BatchResult{
		{Set: true},
		{Set: false, Existing: store.Entry{Value: []byte("holder"), TTL: 50 * time.Second}},
		{Set: true},
	}, res, "results come in input order")
	require.Equal(t, before+1, lastTxID(t, db), "one batch, one commit")

	for key, want := range map[string]store.Entry{
		"new":     {Value: []byte("a"), TTL: time.Hour},
		"held":    {Value: []byte("holder"), TTL: 50 * time.Second},
		"expired": {Value: []byte("c"), TTL: 2 * time.Millisecond},
	} {
		e, err := s.Get(ctxb, key)
		require.NoError(t, err, key)
		require.Equal(t, want, e, key)
	}
}

func TestSetNXBatchDuplicateKeys(t *testing.T) {
	s, _ := openStore(t)
	mustSetNX(t, s, "held", "holder", time.Hour)
	res, err := s.SetNXBatch(ctxb, []store.BatchItem{
		item("dup", "first", time.Hour),
		item("held", "x", time.Hour),
		item("dup", "second", time.Minute),
		item("held", "y", time.Hour),
		item("dup", "third", time.Minute),
	})
	require.NoError(t, err)
	require.True(t, res[0].Set, "the first occurrence sets")
	for _, i := range []int{2, 4} {
		require.False(t, res[i].Set, "a later occurrence sees the first")
		require.Equal(t, []byte("first"), res[i].Existing.Value)
		require.Positive(t, res[i].Existing.TTL)
		require.LessOrEqual(t, res[i].Existing.TTL, time.Hour)
	}
	for _, i := range []int{1, 3} {
		require.False(t, res[i].Set)
		require.Equal(t, []byte("holder"), res[i].Existing.Value)
	}
	e, err := s.Get(ctxb, "dup")
	require.NoError(t, err)
	require.Equal(t, []byte("first"), e.Value)
}

func TestSetNXBatchInvalidItemWritesNothing(t *testing.T) {
	const secret = "tok_live_0a1b2c3d"
	long := strings.Repeat("k", store.MaxKeyLen+1)
	for name, bad := range map[string]store.BatchItem{
		"empty key": item("", "v", time.Hour),
		"long key":  item(long+secret, "v", time.Hour),
		"nil value": {Key: secret, Value: nil, TTL: time.Hour},
		"zero TTL":  item(secret, "v", 0),
		"huge":      {Key: secret, Value: make([]byte, store.MaxValueLen+1), TTL: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			db := openDB(t)
			s := newOver(t, db)
			before := lastTxID(t, db)
			res, err := s.SetNXBatch(ctxb, []store.BatchItem{item("a", "v", time.Hour), bad, item("b", "v", time.Hour)})
			require.ErrorIs(t, err, store.ErrInvalid)
			require.Contains(t, err.Error(), "item 1:", "the error names the bad item by position")
			require.NotContains(t, err.Error(), secret)
			require.Nil(t, res)
			require.Equal(t, before, lastTxID(t, db), "nothing was written")
			require.Nil(t, rawGet(t, db, "a"))
		})
	}
}

// TestSetNXBatchCorruptValueWritesNothing: an item whose key holds a
// value that does not decode fails the whole batch, and the items before
// it are undone.
func TestSetNXBatchCorruptValueWritesNothing(t *testing.T) {
	const secret = "corrupt:tok_live_0a1b2c3d"
	db := openDB(t)
	s := newOver(t, db)
	rawPut(t, db, secret, []byte{9})
	before := lastTxID(t, db)
	res, err := s.SetNXBatch(ctxb, []store.BatchItem{item("a", "v", time.Hour), item(secret, "v", time.Hour), item("b", "v", time.Hour)})
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.Contains(t, err.Error(), "item 1")
	require.Contains(t, err.Error(), keyDigest(secret))
	require.NotContains(t, err.Error(), "tok_live")
	require.Nil(t, res)
	require.Equal(t, before, lastTxID(t, db), "nothing was committed")
	require.Nil(t, rawGet(t, db, "a"))
	require.Equal(t, []byte{9}, rawGet(t, db, secret))
}

// TestSetNXBatchFailedPutIsUndone: a key that names a nested bucket (put
// there through the caller's DB) reads as absent, and bbolt refuses the
// put. The items written before it in the same transaction are undone,
// including one that replaced an expired entry.
func TestSetNXBatchFailedPutIsUndone(t *testing.T) {
	db := openDB(t)
	clock := boltstore.NewFakeClock()
	s := newOver(t, db, boltstore.WithClock(clock.Now), boltstore.WithoutSweeper())
	mustSetNX(t, s, "expired", "old", time.Second)
	clock.Advance(2 * time.Second)
	oldRaw := rawGet(t, db, "expired")
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		_, err := tx.Bucket([]byte(testBucket)).CreateBucket([]byte("nested"))
		return err
	}))
	res, err := s.SetNXBatch(ctxb, []store.BatchItem{
		item("a", "v", time.Hour), item("expired", "new", time.Hour), item("nested", "v", time.Hour),
	})
	require.ErrorIs(t, err, berrors.ErrIncompatibleValue)
	require.Contains(t, err.Error(), "item 2")
	require.Nil(t, res)
	require.Nil(t, rawGet(t, db, "a"), "the earlier put is undone")
	require.Equal(t, oldRaw, rawGet(t, db, "expired"), "the replaced expired entry is restored")

	res, err = s.SetNXBatch(ctxb, []store.BatchItem{item("a", "v", time.Hour)})
	require.NoError(t, err, "the Store goes on")
	require.True(t, res[0].Set)
}

func TestSetNXBatchEmpty(t *testing.T) {
	db := openDB(t)
	s := newOver(t, db)
	before := lastTxID(t, db)
	res, err := s.SetNXBatch(ctxb, nil)
	require.NoError(t, err)
	require.Empty(t, res)
	require.Equal(t, before, lastTxID(t, db))
}

func TestSetNXBatchCopiesValues(t *testing.T) {
	s, _ := openStore(t)
	v := []byte("abc")
	_, err := s.SetNXBatch(ctxb, []store.BatchItem{{Key: "k", Value: v, TTL: time.Hour}})
	require.NoError(t, err)
	v[0] = 'X'
	res, err := s.SetNXBatch(ctxb, []store.BatchItem{item("k", "other", time.Hour)})
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), res[0].Existing.Value)
	res[0].Existing.Value[0] = 'Y'
	e, err := s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), e.Value)
}

func TestSetNXBatchClosedAndCancelled(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(ctxb)
	cancel()
	_, err := s.SetNXBatch(ctx, []store.BatchItem{item("k", "v", time.Hour)})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Get(ctxb, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "a batch whose ctx ended first never runs")
	require.NoError(t, s.Close())
	_, err = s.SetNXBatch(ctxb, []store.BatchItem{item("k", "v", time.Hour)})
	requireClosed(t, err)
}

// TestSetNXBatchRaceOneWinnerPerKey races 16 goroutines, each claiming
// overlapping batches of 64 keys in its own shuffled order (with single
// SetNX calls mixed in), and checks that every key has exactly one
// winner, whose value every loser saw.
func TestSetNXBatchRaceOneWinnerPerKey(t *testing.T) {
	const goroutines, keys, rounds = 16, 64, 5
	s, _ := openStore(t)
	for round := range rounds {
		var wins [keys]atomic.Int32
		var winner [keys]atomic.Value
		seen := make(chan [2]any, goroutines*keys)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				me := fmt.Sprintf("g%d", g)
				order := rand.Perm(keys)
				for start := 0; start < keys; start += 16 {
					chunk := order[start : start+16]
					items := make([]store.BatchItem, len(chunk))
					for i, k := range chunk {
						items[i] = item(fmt.Sprintf("r%d-key-%d", round, k), me, time.Hour)
					}
					res, err := claim(s, g%4 == 3, items)
					if !assert.NoError(t, err) || !assert.Len(t, res, len(items)) {
						return
					}
					for i, k := range chunk {
						if res[i].Set {
							wins[k].Add(1)
							winner[k].Store(me)
						} else {
							seen <- [2]any{k, string(res[i].Existing.Value)}
						}
					}
				}
			})
		}
		wg.Wait()
		close(seen)
		for k := range keys {
			require.EqualValues(t, 1, wins[k].Load(), "round %d key %d must have exactly one winner", round, k)
			e, err := s.Get(ctxb, fmt.Sprintf("r%d-key-%d", round, k))
			require.NoError(t, err)
			require.Equal(t, winner[k].Load(), string(e.Value))
		}
		for l := range seen {
			require.Equal(t, winner[l[0].(int)].Load(), l[1], "a loser sees the winner's value")
		}
	}
}

// claim claims items with one SetNXBatch or, when single, one SetNX each.
func claim(s *boltstore.Store, single bool, items []store.BatchItem) ([]store.BatchResult, error) {
	if !single {
		return s.SetNXBatch(ctxb, items)
	}
	res := make([]store.BatchResult, len(items))
	for i, it := range items {
		set, existing, err := s.SetNX(ctxb, it.Key, it.Value, it.TTL)
		if err != nil {
			return nil, err
		}
		res[i] = store.BatchResult{Set: set, Existing: existing}
	}
	return res, nil
}
