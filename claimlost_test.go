package idemkit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/storetest"
)

// TestDoReportsCompleteInLeaseLostAfterCommit: fn completes its claim in
// its own transaction, CompleteIn answers ErrLeaseLost (another caller
// took the key over), and fn commits anyway and returns its value without
// an error: a caller bug, but an easy one. Nothing of fn's was recorded,
// so Do returns fn's value with an error wrapping ErrLeaseLost, as for any
// result it could not record, never a nil error.
func TestDoReportsCompleteInLeaseLostAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := mustMem()
		defer mem.Close()
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithLease(20*time.Millisecond), idemkit.WithoutHeartbeat())
		require.NoError(t, err)
		ctx := context.Background()
		var other *idemkit.Claim
		var completeErr error
		res, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
			time.Sleep(40 * time.Millisecond) // in the bubble: the lease ends and another caller claims
			var err error
			other, _, err = e.Begin(ctx, "k", "")
			require.NoError(t, err)
			require.NotNil(t, other)
			tx := storetest.NewTx(mem)
			completeErr = idemkit.ClaimFromContext(ctx).CompleteIn(ctx, tx, []byte("stale"))
			tx.Commit() // the caller bug: commits despite the error
			return []byte("fn's answer"), nil
		})
		require.ErrorIs(t, completeErr, idemkit.ErrLeaseLost)
		require.ErrorIs(t, err, idemkit.ErrLeaseLost, "fn's completion failed: its result was not recorded")
		assert.Equal(t, "fn's answer", string(res.Value), "fn's value comes with the error, as for other unrecorded results")
		assert.False(t, res.Replayed)

		_, _, err = e.Begin(ctx, "k", "")
		require.ErrorIs(t, err, idemkit.ErrInProgress, "the new owner's claim is left alone")
		require.NoError(t, other.Complete(ctx, []byte("fresh")))
		res, err = e.Do(ctx, "k", "", nil)
		require.NoError(t, err)
		assert.Equal(t, "fresh", string(res.Value))
	})
}

// TestDoKeepsFnsErrorWhenCompleteInLostTheLease: fn that returns
// CompleteIn's ErrLeaseLost itself (the correct use) gets it back once,
// not joined with itself.
func TestDoKeepsFnsErrorWhenCompleteInLostTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := mustMem()
		defer mem.Close()
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithLease(20*time.Millisecond), idemkit.WithoutHeartbeat())
		require.NoError(t, err)
		ctx := context.Background()
		var completeErr error
		_, err = e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
			time.Sleep(40 * time.Millisecond)
			other, _, err := e.Begin(ctx, "k", "")
			require.NoError(t, err)
			defer other.Release(ctx)
			completeErr = idemkit.ClaimFromContext(ctx).CompleteIn(ctx, storetest.NewTx(mem), []byte("stale"))
			return nil, completeErr // rolled back
		})
		require.ErrorIs(t, err, idemkit.ErrLeaseLost)
		assert.Equal(t, completeErr, err, "fn's own error, as it returned it")
	})
}
