package idemkit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
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
		mem := testkit.NewMem(t)
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
		mem := testkit.NewMem(t)
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

func TestOnStoreWorksOnTheGivenStore(t *testing.T) {
	e := testkit.NewEngine(t)
	_, err := e.OnStore(nil)
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	mem := testkit.NewMem(t)
	log := &keyLog{Store: mem}
	v, err := e.OnStore(log)
	require.NoError(t, err)
	res, err := v.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.NotEmpty(t, log.keys)
	assert.Same(t, log, v.Store())
}

// TestOnStoreNeverBeats: a view over a caller's transaction runs without
// heartbeats, whatever the options: a beat would run on the transaction
// from the beat scheduler's goroutine, concurrently with the caller's own
// statements (a *sql.Tx or pgx.Tx is not meant to be shared), and the
// transaction's row lock holds the key anyway.
func TestOnStoreNeverBeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t)
		ctx := context.Background()
		mem := testkit.NewMem(t)
		tx := &swapCount{Store: mem}
		v, err := e.OnStore(tx)
		require.NoError(t, err)
		vv, err := v.With(idemkit.WithHeartbeat(time.Millisecond))
		require.NoError(t, err)
		for i, begin := range []func() (*idemkit.Claim, idemkit.Result, error){
			func() (*idemkit.Claim, idemkit.Result, error) {
				return v.Begin(ctx, "a", "", idemkit.WithLease(30*time.Millisecond), idemkit.WithHeartbeat(time.Millisecond))
			},
			func() (*idemkit.Claim, idemkit.Result, error) { return vv.Begin(ctx, "b", "") },
		} {
			c, _, err := begin()
			require.NoError(t, err)
			require.NotNil(t, c)
			time.Sleep(20 * time.Millisecond)
			assert.Zero(t, tx.n.Load(), "claim %d beat through the transaction's view", i)
			require.NoError(t, c.Complete(ctx, []byte("v")))
			tx.n.Store(0)
		}
	})
}
