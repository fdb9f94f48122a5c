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

// TestOnStoreOutlivesTheLease: Do on a view bound to the caller's
// transaction (OnStore), with fn running twice the lease. The row lock
// keeps duplicates out in this mode and nothing beats the lease, so the
// lease must not end the claim: the completion, checked inside the
// transaction, finds the claim still there, and Do succeeds; after the
// commit every repeat replays. storetest.Tx checks the swap against the
// store at once, as a database does.
func TestOnStoreOutlivesTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := mustMem()
		defer mem.Close()
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		ctx := context.Background()
		tx := storetest.NewTx(mem)
		inTx, err := e.OnStore(tx)
		require.NoError(t, err)
		res, err := inTx.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
			time.Sleep(600 * time.Millisecond) // a long transaction
			return []byte("order #1"), nil
		})
		require.NoError(t, err, "a long transaction fails for a lease it does not need")
		assert.Equal(t, "order #1", string(res.Value))
		tx.Commit()

		res, err = e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
			t.Fatal("a repeat ran the work")
			return nil, nil
		})
		require.NoError(t, err)
		assert.True(t, res.Replayed)
		assert.Equal(t, "order #1", string(res.Value))
	})
}

// TestOnStoreCommitWithoutEndingKeepsTheKey: a caller who takes a claim
// through an OnStore view and commits without ending it has committed
// whatever the transaction did, with no result recorded. The key then
// answers ErrInProgress for the retention, long after the lease, and
// never runs the work a second time; Forget frees it.
func TestOnStoreCommitWithoutEndingKeepsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := mustMem()
		defer mem.Close()
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithLease(300*time.Millisecond), idemkit.WithRetention(time.Hour))
		require.NoError(t, err)
		ctx := context.Background()
		inTx, err := e.OnStore(storetest.NewTx(mem))
		require.NoError(t, err)
		c, _, err := inTx.Begin(ctx, "order-1", "fp")
		require.NoError(t, err)
		require.NotNil(t, c)
		// The caller commits here and forgets c.

		time.Sleep(time.Minute)
		_, err = e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
			t.Fatal("the work ran twice")
			return nil, nil
		})
		require.ErrorIs(t, err, idemkit.ErrInProgress, "a minute after the lease")
		info, err := e.Inspect(ctx, idemkit.ModeDo, "order-1")
		require.NoError(t, err)
		assert.Equal(t, idemkit.StateInProgress, info.State)
		assert.Greater(t, info.TTL, 58*time.Minute, "the claim lives for the retention")

		ok, err := e.Forget(ctx, idemkit.ModeDo, "order-1")
		require.NoError(t, err)
		require.True(t, ok)
		res, err := e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		require.NoError(t, err)
		assert.Equal(t, "again", string(res.Value))
	})
}
