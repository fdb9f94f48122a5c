package idemfunc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// txStore is a store view bound to a pretend database transaction: a
// write is checked at once and applied on commit.
type txStore struct {
	store.Store
	pending []func()
}

func (tx *txStore) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	ent, err := tx.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) || (err == nil && string(ent.Value) != string(old)) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	tx.pending = append(tx.pending, func() { _, _ = tx.Store.CompareAndSwap(ctx, key, old, v, ttl) })
	return true, nil
}

type receipt struct {
	Order int `json:"order"`
}

// TestCompleteInTheConsumersTransaction records a wrapped function's
// result in its own transaction: rolled back, the message runs again;
// committed, a redelivery gets the recorded result.
func TestCompleteInTheConsumersTransaction(t *testing.T) {
	s := mustMem()
	t.Cleanup(func() { _ = s.Close() })
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	commit := false
	runs := 0
	place := wrap(t, e, "orders", func(ctx context.Context, m msg) (receipt, error) {
		runs++
		tx := &txStore{Store: s}
		r := receipt{Order: runs}
		if err := idemkit.CompleteIn(ctx, tx, r); err != nil {
			return receipt{}, err
		}
		if !commit {
			return receipt{}, errors.New("commit failed")
		}
		for _, f := range tx.pending {
			f()
		}
		return r, nil
	})
	ctx := context.Background()
	_, _, err = place(ctx, msg{ID: "m1"})
	require.EqualError(t, err, "commit failed")

	commit = true
	got, res, err := place(ctx, msg{ID: "m1"})
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.Equal(t, 2, got.Order, "the rolled-back run left nothing behind")

	got, res, err = place(ctx, msg{ID: "m1"})
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, 2, got.Order)
	assert.Equal(t, 2, runs)
}
