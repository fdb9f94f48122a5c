package idemfunc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/storetest"
)

type receipt struct {
	Order int `json:"order"`
}

// TestCompleteInTheConsumersTransaction records a wrapped function's
// result in its own transaction: rolled back, the message runs again;
// committed, a redelivery gets the recorded result.
func TestCompleteInTheConsumersTransaction(t *testing.T) {
	s := testkit.NewMem(t)
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	commit := false
	runs := 0
	place := wrap(t, e, "orders", func(ctx context.Context, m msg) (receipt, error) {
		runs++
		tx := storetest.NewTx(s)
		r := receipt{Order: runs}
		if err := idemkit.CompleteIn(ctx, tx, r); err != nil {
			return receipt{}, err
		}
		if !commit {
			return receipt{}, errors.New("commit failed")
		}
		tx.Commit()
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
