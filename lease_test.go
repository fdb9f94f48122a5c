package idemkit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
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
		mem := testkit.NewMem(t)
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
		mem := testkit.NewMem(t)
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

func TestDoLeaseLostDoesNotOverwrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &testkit.Recorder{}
		e := testkit.NewEngine(t, idemkit.WithLease(50*time.Millisecond), idemkit.WithoutHeartbeat(), idemkit.WithObserver(rec))
		ctx := context.Background()
		secondDone := make(chan idemkit.Result, 1)
		res, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
			time.Sleep(80 * time.Millisecond) // the lease expires while we work
			r, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return []byte("second owner"), nil })
			require.NoError(t, err)
			secondDone <- r
			return []byte("first owner"), nil
		})
		require.ErrorIs(t, err, idemkit.ErrLeaseLost)
		assert.Equal(t, "first owner", string(res.Value), "fn's value is still returned")
		assert.False(t, (<-secondDone).Replayed)
		assert.Equal(t, 1, rec.Count(idemkit.EventLeaseLost))
		res, err = e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.NoError(t, err)
		assert.Equal(t, "second owner", string(res.Value), "the late first owner overwrote the record")
	})
}

// When fn fails after its lease ended and another caller took the key
// over, the release removes nothing of the new owner's, and the observer
// is told the lease was lost, not that the claim was released.
func TestDoFailureAfterLostLeaseIsNotReportedAsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &testkit.Recorder{}
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat(), idemkit.WithObserver(rec))
		ctx := context.Background()
		_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
			time.Sleep(80 * time.Millisecond) // the lease ends while fn runs
			_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("second"), nil })
			require.NoError(t, err, "the second caller takes the key over")
			return nil, errors.New("failed")
		})
		require.EqualError(t, err, "failed")
		assert.Zero(t, rec.Count(idemkit.EventReleased), "nothing was released")
		assert.Equal(t, 1, rec.Count(idemkit.EventLeaseLost), "the lost lease is an outcome to observe")
		res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.NoError(t, err)
		assert.Equal(t, "second", string(res.Value), "the second owner's result is kept")
	})
}

// A claim whose lease ended while fn ran, and that nobody took over, is
// still its owner's: fn's failure releases it (keeping its fencing token
// for the next claim), and fn's success records the result.
func TestDoLeaseEndedWithoutTakeoverStaysTheOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &testkit.Recorder{}
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat(), idemkit.WithObserver(rec))
		ctx := context.Background()
		var fence uint64
		_, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
			fence, _ = idemkit.FenceFromContext(ctx)
			time.Sleep(80 * time.Millisecond)
			return nil, errors.New("failed")
		})
		require.EqualError(t, err, "failed")
		assert.Equal(t, 1, rec.Count(idemkit.EventReleased))
		info, err := e.Inspect(ctx, idemkit.ModeDo, "k")
		require.NoError(t, err)
		assert.Equal(t, idemkit.StateReleased, info.State)
		assert.Equal(t, fence, info.Fence, "the released record keeps the token")

		res, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
			next, _ := idemkit.FenceFromContext(ctx)
			assert.Greater(t, next, fence, "the next claim's token is larger")
			time.Sleep(80 * time.Millisecond)
			return []byte("late"), nil
		})
		require.NoError(t, err, "a late completion nobody overtook is recorded")
		assert.False(t, res.Replayed)
		assert.Zero(t, rec.Count(idemkit.EventLeaseLost))
	})
}
