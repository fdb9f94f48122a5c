package main

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// repoKinds builds each orderRepo implementation for the shared tests.
var repoKinds = map[string]func(t *testing.T) orderRepo{
	"memory": func(*testing.T) orderRepo { return newMemoryOrders(maxMemoryOrders, maxMemoryOrdersPerUser) },
	"bolt":   func(t *testing.T) orderRepo { return openTestBoltOrders(t, filepath.Join(t.TempDir(), "orders.db")) },
	// A table of a fresh database; skipped when PostgreSQL does not answer.
	"postgres": func(t *testing.T) orderRepo { return openTestPgOrders(t) },
}

// openTestBoltOrders opens a bolt file and a repository on it, closed when
// the test ends.
func openTestBoltOrders(t *testing.T, path string) *boltOrders {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	r, err := newBoltOrders(db)
	require.NoError(t, err)
	return r
}

func eachRepo(t *testing.T, test func(t *testing.T, r orderRepo)) {
	for name, open := range repoKinds {
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

func TestOrderRepoCreateAndList(t *testing.T) {
	eachRepo(t, func(t *testing.T, r orderRepo) {
		ctx := context.Background()
		list, err := r.List(ctx, "alice")
		require.NoError(t, err)
		require.NotNil(t, list, "an empty list must encode as [] not null")
		require.Empty(t, list)

		a1, created, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "")
		require.NoError(t, err)
		require.True(t, created)
		b1, _, err := r.Create(ctx, Order{SKU: "pen", Qty: 2, User: "bob"}, "")
		require.NoError(t, err)
		a2, _, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "")
		require.NoError(t, err)

		assert.Less(t, a1.ID, b1.ID)
		assert.Less(t, b1.ID, a2.ID)
		list, err = r.List(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, []Order{a1, a2}, list, "without a dedup key, identical orders are distinct")
		list, err = r.List(ctx, "bob")
		require.NoError(t, err)
		assert.Equal(t, []Order{{ID: b1.ID, SKU: "pen", Qty: 2, User: "bob"}}, list)
	})
}

func TestOrderRepoUniqueKey(t *testing.T) {
	eachRepo(t, func(t *testing.T, r orderRepo) {
		ctx := context.Background()
		first, created, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
		require.NoError(t, err)
		require.True(t, created)

		again, created, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, first, again)

		_, _, err = r.Create(ctx, Order{SKU: "book", Qty: 5, User: "alice"}, "key:k1")
		require.ErrorIs(t, err, errKeyReused)
		_, _, err = r.Create(ctx, Order{SKU: "pen", Qty: 1, User: "alice"}, "key:k1")
		require.ErrorIs(t, err, errKeyReused)

		bobs, created, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "bob"}, "key:k1")
		require.NoError(t, err)
		assert.True(t, created, "keys are scoped by user")
		assert.NotEqual(t, first.ID, bobs.ID)

		list, err := r.List(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, []Order{first}, list)
	})
}

// Many goroutines create the same (user, key) order at once: exactly one
// creates it and every one gets it.
func TestOrderRepoUniqueKeyRace(t *testing.T) {
	eachRepo(t, func(t *testing.T, r orderRepo) {
		const racers = 64
		var wg sync.WaitGroup
		var winners atomic.Int32
		ids := make([]uint64, racers)
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				o, created, err := r.Create(context.Background(), Order{SKU: "book", Qty: 1, User: "alice"}, "key:race")
				assert.NoError(t, err)
				if created {
					winners.Add(1)
				}
				ids[i] = o.ID
			})
		}
		close(start)
		wg.Wait()
		assert.EqualValues(t, 1, winners.Load())
		for _, id := range ids {
			assert.Equal(t, ids[0], id)
		}
		list, err := r.List(context.Background(), "alice")
		require.NoError(t, err)
		assert.Len(t, list, 1)
	})
}

func TestOrderRepoCancelledContext(t *testing.T) {
	eachRepo(t, func(t *testing.T, r orderRepo) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "")
		require.ErrorIs(t, err, context.Canceled)
		_, err = r.List(ctx, "alice")
		require.ErrorIs(t, err, context.Canceled)
		list, err := r.List(context.Background(), "alice")
		require.NoError(t, err)
		assert.Empty(t, list)
	})
}

// Orders, their numbering and the unique index survive reopening the file.
func TestBoltOrdersPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.db")
	ctx := context.Background()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	r, err := newBoltOrders(db)
	require.NoError(t, err)
	first, _, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	r2 := openTestBoltOrders(t, path)
	again, created, err := r2.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first, again)
	next, _, err := r2.Create(ctx, Order{SKU: "pen", Qty: 1, User: "alice"}, "")
	require.NoError(t, err)
	assert.Greater(t, next.ID, first.ID)
	list, err := r2.List(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, []Order{first, next}, list)
}

func TestBoltOrdersCorrupt(t *testing.T) {
	r := openTestBoltOrders(t, filepath.Join(t.TempDir(), "orders.db"))
	ctx := context.Background()
	o, _, err := r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
	require.NoError(t, err)
	require.NoError(t, r.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(ordersBucket).Bucket([]byte("alice")).Put(orderID(o.ID), []byte("{not json"))
	}))
	_, err = r.List(ctx, "alice")
	require.Error(t, err)
	_, _, err = r.Create(ctx, Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
	require.Error(t, err)
}
