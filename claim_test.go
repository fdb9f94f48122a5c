package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

func TestBeginCompleteReplays(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	c, res, err := e.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	require.NotNil(t, c)
	defer c.Release(ctx)
	assert.False(t, res.Replayed)

	_, _, err = e.Begin(ctx, "k", "fp")
	require.ErrorIs(t, err, idemkit.ErrInProgress)
	_, _, err = e.Begin(ctx, "k", "other")
	require.ErrorIs(t, err, idemkit.ErrMismatch)

	require.NoError(t, c.Complete(ctx, []byte("result")))
	c.Release(ctx) // deferred in real code: a no-op after Complete
	require.NoError(t, c.Complete(ctx, []byte("ignored")), "a second end changes nothing")

	again, res, err := e.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	assert.Nil(t, again)
	assert.True(t, res.Replayed)
	assert.Equal(t, "result", string(res.Value))
}

func TestBeginRaceHasOneWinner(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	for round := range 20 {
		key := "race-" + string(rune('a'+round))
		var winners atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				c, _, err := e.Begin(ctx, key, "")
				if c != nil {
					winners.Add(1)
					require.NoError(t, c.Complete(ctx, []byte("v")))
					return
				}
				if err != nil {
					assert.ErrorIs(t, err, idemkit.ErrInProgress)
				}
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, winners.Load(), "round %d", round)
	}
}

func TestClaimFailReleasesOrRecordsFinal(t *testing.T) {
	errFinal := errors.New("declined")
	e := newEngine(t, idemkit.WithErrorCodec(idemkit.FinalErrors(errFinal)))
	ctx := context.Background()
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	boom := errors.New("transient")
	require.Equal(t, boom, c.Fail(ctx, boom))
	c, _, err = e.Begin(ctx, "k", "")
	require.NoError(t, err)
	require.NotNil(t, c, "a transient failure released the key")
	require.ErrorIs(t, c.Fail(ctx, errFinal), errFinal)
	again, res, err := e.Begin(ctx, "k", "")
	assert.Nil(t, again)
	assert.True(t, res.Replayed)
	require.ErrorIs(t, err, errFinal)
}

func TestClaimHeartbeatKeepsTheKey(t *testing.T) {
	e := newEngine(t, idemkit.WithLease(300*time.Millisecond))
	ctx := context.Background()
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Second) // three leases
	for time.Now().Before(deadline) {
		_, _, err := e.Begin(ctx, "k", "")
		require.ErrorIs(t, err, idemkit.ErrInProgress, "the heartbeat must keep the claim alive")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, c.Complete(ctx, []byte("v")))
}

func TestCompleteInCommitsWithTheTransaction(t *testing.T) {
	mem := mustMem()
	defer mem.Close()
	rec := &recorder{}
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
	assert.Zero(t, rec.count(idemkit.EventLeaseLost))

	require.ErrorIs(t, c.CompleteIn(ctx, nil, nil), idemkit.ErrInvalid)
}

func TestCompleteInAfterLostLeaseRefuses(t *testing.T) {
	mem := mustMem()
	defer mem.Close()
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
}

func TestOnStoreWorksOnTheGivenStore(t *testing.T) {
	e := newEngine(t)
	_, err := e.OnStore(nil)
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	mem := mustMem()
	defer mem.Close()
	log := &keyLog{Store: mem}
	v, err := e.OnStore(log)
	require.NoError(t, err)
	res, err := v.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.NotEmpty(t, log.keys)
	assert.Same(t, log, v.Store())
}

// TestHeartbeatsOfManyClaims holds claims with different leases and beat
// intervals at once, each for several leases: the engine's one beat
// scheduler must keep every one of them.
func TestHeartbeatsOfManyClaims(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	var claims []*idemkit.Claim
	for i := range 12 {
		lease := time.Duration(300+100*(i%3)) * time.Millisecond // generous: a loaded machine delays beats
		every := lease / time.Duration(3+i%4)
		c, _, err := e.Begin(ctx, fmt.Sprint("k", i), "", idemkit.WithLease(lease), idemkit.WithHeartbeat(every))
		require.NoError(t, err)
		require.NotNil(t, c)
		claims = append(claims, c)
	}
	time.Sleep(1600 * time.Millisecond) // over three leases each
	for i, c := range claims {
		_, _, err := e.Begin(ctx, fmt.Sprint("k", i), "")
		require.ErrorIs(t, err, idemkit.ErrInProgress, "claim %d lost its lease", i)
		require.NoError(t, c.Complete(ctx, []byte("v")))
	}
}

// TestOnStoreNeverBeats: a view over a caller's transaction runs without
// heartbeats, whatever the options: a beat would run on the transaction
// from the beat scheduler's goroutine, concurrently with the caller's own
// statements (a *sql.Tx or pgx.Tx is not meant to be shared), and the
// transaction's row lock holds the key anyway.
func TestOnStoreNeverBeats(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	mem := mustMem()
	defer mem.Close()
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
}

// swapCount counts CompareAndSwap calls.
type swapCount struct {
	store.Store
	n atomic.Int32
}

func (s *swapCount) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	s.n.Add(1)
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}
