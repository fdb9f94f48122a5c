package boltstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// TestSetNXBatchUndoneInSharedCommit queues a batch that fails part-way
// (its last key names a nested bucket, which bbolt refuses to overwrite)
// between two SetNX calls in one committer transaction: the transaction
// commits the SetNX calls and none of the batch's puts.
func TestSetNXBatchUndoneInSharedCommit(t *testing.T) {
	s, db := newHeld(t)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		_, err := tx.Bucket([]byte("b")).CreateBucket([]byte("nested"))
		return err
	}))
	rawPut(t, db, "expired", encode([]byte("old"), 1))
	block(t, s)
	first := goSetNX(context.Background(), s, "first", "v")
	testkit.WaitFor(t, "first to queue", func() bool { return len(s.ops) == 1 })
	batch := make(chan error, 1)
	go func() {
		_, err := s.SetNXBatch(context.Background(), []store.BatchItem{
			{Key: "a", Value: []byte("v"), TTL: time.Hour},
			{Key: "expired", Value: []byte("new"), TTL: time.Hour},
			{Key: "nested", Value: []byte("v"), TTL: time.Hour},
		})
		batch <- err
	}()
	testkit.WaitFor(t, "the batch to queue", func() bool { return len(s.ops) == 2 })
	last := goSetNX(context.Background(), s, "last", "v")
	testkit.WaitFor(t, "last to queue", func() bool { return len(s.ops) == 3 })
	before := writeTxID(t, db)
	s.txMu.Unlock()

	require.ErrorIs(t, <-batch, berrors.ErrIncompatibleValue)
	for _, ch := range []<-chan setResult{first, last} {
		r := <-ch
		require.NoError(t, r.err)
		require.True(t, r.set)
	}
	require.Equal(t, before+1, writeTxID(t, db), "one commit for the three callers")
	require.Nil(t, rawGet(t, db, "a"), "the batch's first put is undone")
	require.Equal(t, encode([]byte("old"), 1), rawGet(t, db, "expired"), "the expired entry it replaced is restored")
}
