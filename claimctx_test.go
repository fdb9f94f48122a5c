package idemkit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/storetest"
)

var errRolledBack = errors.New("order rejected; transaction rolled back")

func TestDoCompletedInCommittedTransactionReturnsTheRecord(t *testing.T) {
	mem := testkit.NewMem(t)
	rec := &testkit.Recorder{}
	e, err := idemkit.New(mem, idemkit.WithObserver(rec))
	require.NoError(t, err)
	ctx := context.Background()

	res, err := e.Do(ctx, "order-1", "fp", func(ctx context.Context) ([]byte, error) {
		c := idemkit.ClaimFromContext(ctx)
		require.NotNil(t, c)
		tx := storetest.NewTx(mem)
		if err := c.CompleteIn(ctx, tx, []byte("order #1")); err != nil {
			return nil, err
		}
		tx.Commit()
		return []byte("what fn returned"), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "order #1", string(res.Value), "the first caller gets what every repeat gets")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, rec.Count(idemkit.EventCompleted), "completed once, in the transaction")
	assert.Zero(t, rec.Count(idemkit.EventReleased))

	res, err = e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
		t.Fatal("a repeat ran the work")
		return nil, nil
	})
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "order #1", string(res.Value))
}

func TestDoCompletedInRolledBackTransactionFreesTheKey(t *testing.T) {
	mem := testkit.NewMem(t)
	e, err := idemkit.New(mem, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()

	rolledBack := func(ctx context.Context) ([]byte, error) {
		require.NoError(t, idemkit.ClaimFromContext(ctx).CompleteIn(ctx, storetest.NewTx(mem), []byte("never committed")))
		return nil, errRolledBack // the transaction is dropped
	}
	_, err = e.Do(ctx, "k", "", rolledBack)
	require.ErrorIs(t, err, errRolledBack)

	// Rolled back, fn answers without an error: nothing is stored either.
	res, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
		require.NoError(t, idemkit.ClaimFromContext(ctx).CompleteIn(ctx, storetest.NewTx(mem), []byte("never committed")))
		return []byte("sold out"), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "sold out", string(res.Value))

	// fn released the claim itself after its rollback (a deferred Release).
	_, err = e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
		c := idemkit.ClaimFromContext(ctx)
		defer c.Release(ctx)
		require.NoError(t, c.CompleteIn(ctx, storetest.NewTx(mem), []byte("never committed")))
		return nil, errRolledBack
	})
	require.ErrorIs(t, err, errRolledBack)

	ran := false
	res, err = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { ran = true; return []byte("placed"), nil })
	require.NoError(t, err)
	assert.True(t, ran, "after rollbacks a retry runs")
	assert.Equal(t, "placed", string(res.Value))
}

func TestDoCompletedInWhileLeaseLostDoesNotClaimTheRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewMem(t)
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithLease(20*time.Millisecond), idemkit.WithoutHeartbeat())
		require.NoError(t, err)
		ctx := context.Background()
		var other *idemkit.Claim
		res, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
			tx := storetest.NewTx(mem)
			require.NoError(t, idemkit.ClaimFromContext(ctx).CompleteIn(ctx, tx, []byte("stale")))
			time.Sleep(40 * time.Millisecond) // the commit stalls; the lease ends and another caller claims
			var err error
			other, _, err = e.Begin(ctx, "k", "")
			require.NoError(t, err)
			require.NotNil(t, other)
			tx.Commit() // the database refuses: the row is no longer ours
			return []byte("fn's answer"), nil
		})
		require.NoError(t, err)
		assert.Equal(t, "fn's answer", string(res.Value), "a record that is not ours is never reported as committed")
		_, _, err = e.Begin(ctx, "k", "")
		require.ErrorIs(t, err, idemkit.ErrInProgress, "the new owner's claim is left alone")
		require.NoError(t, other.Complete(ctx, []byte("fresh")))
	})
}

func TestTypedCompleteIn(t *testing.T) {
	mem := testkit.NewMem(t)
	e, err := idemkit.New(mem, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()
	type receipt struct{ Order int }

	require.ErrorIs(t, idemkit.CompleteIn(ctx, mem, receipt{1}), idemkit.ErrInvalid, "outside Do")

	got, res, err := idemkit.Do(ctx, e, "k", "", func(ctx context.Context) (receipt, error) {
		tx := storetest.NewTx(mem)
		if err := idemkit.CompleteIn(ctx, tx, receipt{Order: 7}); err != nil {
			return receipt{}, err
		}
		tx.Commit()
		return receipt{Order: 7}, nil
	})
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.Equal(t, 7, got.Order)
	got, res, err = idemkit.Do(ctx, e, "k", "", func(context.Context) (receipt, error) {
		t.Fatal("a repeat ran the work")
		return receipt{}, nil
	})
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, 7, got.Order)

	_, _, err = idemkit.Do(ctx, e, "k2", "", func(ctx context.Context) (receipt, error) {
		return receipt{}, idemkit.CompleteIn(ctx, mem, func() {})
	})
	require.ErrorIs(t, err, idemkit.ErrInvalid, "a value the codec cannot encode")
}

// TestCompleteInRace races many callers at one key, each completing in
// its own transaction: exactly one transaction commits, and every other
// caller (waiting with WithWait) gets the committed record.
func TestCompleteInRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewMem(t)
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithWait(10*time.Millisecond))
		require.NoError(t, err)
		ctx := context.Background()
		var commits atomic.Int32
		var wg sync.WaitGroup
		results := make([]string, 64)
		for i := range results {
			wg.Go(func() {
				res, err := e.Do(ctx, "order-1", "fp", func(ctx context.Context) ([]byte, error) {
					tx := storetest.NewTx(mem)
					if err := idemkit.ClaimFromContext(ctx).CompleteIn(ctx, tx, []byte("order #1")); err != nil {
						return nil, err
					}
					time.Sleep(5 * time.Millisecond) // the business write
					tx.Commit()
					commits.Add(1)
					return []byte("order #1"), nil
				})
				if assert.NoError(t, err) {
					results[i] = string(res.Value)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), commits.Load(), "transactions committed")
		for i, r := range results {
			assert.Equal(t, "order #1", r, "caller %d", i)
		}
	})
}

func TestCompleteInCommitsWithTheTransaction(t *testing.T) {
	mem := testkit.NewMem(t)
	rec := &testkit.Recorder{}
	e, err := idemkit.New(mem, idemkit.WithObserver(rec))
	require.NoError(t, err)
	ctx := context.Background()

	// Rolled back: the record stays in progress until Release frees it.
	c, _, err := e.Begin(ctx, "order-1", "")
	require.NoError(t, err)
	require.NoError(t, c.CompleteIn(ctx, storetest.NewTx(mem), []byte("order #1")))
	_, _, err = e.Begin(ctx, "order-1", "")
	require.ErrorIs(t, err, idemkit.ErrInProgress, "nothing committed yet")
	c.Release(ctx) // the transaction rolled back
	c, _, err = e.Begin(ctx, "order-1", "")
	require.NoError(t, err)
	require.NotNil(t, c, "a retry runs after the rollback")

	// Committed: Release afterwards changes nothing and reports no loss.
	tx := storetest.NewTx(mem)
	require.NoError(t, c.CompleteIn(ctx, tx, []byte("order #1")))
	tx.Commit()
	c.Release(ctx)
	again, res, err := e.Begin(ctx, "order-1", "")
	require.NoError(t, err)
	assert.Nil(t, again)
	assert.Equal(t, "order #1", string(res.Value))
	assert.Zero(t, rec.Count(idemkit.EventLeaseLost))

	require.ErrorIs(t, c.CompleteIn(ctx, nil, nil), idemkit.ErrInvalid)
}

func TestCompleteInAfterLostLeaseRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewMem(t)
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithLease(20*time.Millisecond), idemkit.WithoutHeartbeat())
		require.NoError(t, err)
		ctx := context.Background()
		stale, _, err := e.Begin(ctx, "k", "")
		require.NoError(t, err)
		time.Sleep(40 * time.Millisecond) // the lease ends; another caller takes the key
		owner, _, err := e.Begin(ctx, "k", "")
		require.NoError(t, err)
		require.NotNil(t, owner)
		tx := storetest.NewTx(mem)
		require.ErrorIs(t, stale.CompleteIn(ctx, tx, []byte("stale")), idemkit.ErrLeaseLost)
		assert.Zero(t, tx.Pending(), "a stale owner must never commit")
		stale.Release(ctx)
		_, _, err = e.Begin(ctx, "k", "")
		require.ErrorIs(t, err, idemkit.ErrInProgress, "the stale release left the new owner's claim alone")
		require.NoError(t, owner.Complete(ctx, []byte("fresh")))
	})
}
