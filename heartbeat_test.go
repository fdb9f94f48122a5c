package idemkit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDoHeartbeatKeepsLongWorkClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Generous times: a loaded 2-core machine can delay a beat by 100ms.
		e := testkit.NewEngine(t, idemkit.WithLease(400*time.Millisecond), idemkit.WithHeartbeat(100*time.Millisecond))
		ctx := context.Background()
		var duplicateErr error
		res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
			time.Sleep(1300 * time.Millisecond) // more than three leases
			_, duplicateErr = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("stolen"), nil })
			return []byte("mine"), nil
		})
		require.NoError(t, err)
		assert.Equal(t, "mine", string(res.Value))
		require.ErrorIs(t, duplicateErr, idemkit.ErrInProgress, "the heartbeat did not keep the lease")
	})
}

func TestClaimHeartbeatKeepsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, idemkit.WithLease(300*time.Millisecond))
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
	})
}

// TestHeartbeatsOfManyClaims holds claims with different leases and beat
// intervals at once, each for several leases: the engine's one beat
// scheduler must keep every one of them.
func TestHeartbeatsOfManyClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t)
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
	})
}

// TestHeartbeatNotShorterThanLeaseIsRefused: a heartbeat interval that is
// not shorter than the lease in force would let the lease end before the
// first beat, so another caller could take the key while fn runs. It is
// refused where the two meet (New, With, a call), never replaced by
// another interval; fn does not run.
func TestHeartbeatNotShorterThanLeaseIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, err := idemkit.New(testkit.NewMem(t), idemkit.WithHeartbeat(time.Second), idemkit.WithLease(time.Second))
		require.ErrorIs(t, err, idemkit.ErrInvalid)
		require.ErrorContains(t, err, "WithHeartbeat(1s) must be shorter than the lease")

		e := testkit.NewEngine(t, idemkit.WithHeartbeat(time.Second)) // lease 30s: fine
		_, err = e.With(idemkit.WithLease(time.Second))
		require.ErrorIs(t, err, idemkit.ErrInvalid)

		var runs atomic.Int32
		_, err = e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) {
			runs.Add(1)
			return nil, nil
		}, idemkit.WithLease(300*time.Millisecond))
		require.ErrorIs(t, err, idemkit.ErrInvalid)
		require.ErrorContains(t, err, "WithHeartbeat(1s) must be shorter than the lease (WithLease, 300ms)")
		require.Zero(t, runs.Load(), "fn ran under a refused configuration")

		// A shorter per-call heartbeat makes the same lease fine.
		_, err = e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) {
			runs.Add(1)
			return nil, nil
		}, idemkit.WithLease(300*time.Millisecond), idemkit.WithHeartbeat(100*time.Millisecond))
		require.NoError(t, err)
		require.EqualValues(t, 1, runs.Load())
	})
}

// slowBeats is a Store whose lease extensions (CompareAndSwap of a claim's
// record for its next beat, idemkit.IsBeat) take a while, counting those under way.
type slowBeats struct {
	store.Store
	running atomic.Int32
}

func (s *slowBeats) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if idemkit.IsBeat(old, nw) {
		s.running.Add(1)
		defer s.running.Add(-1)
		time.Sleep(15 * time.Millisecond)
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func TestDoWaitsForHeartbeatUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := testkit.NewMem(t)
		s := &slowBeats{Store: mem}
		e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithLease(300*time.Millisecond), idemkit.WithHeartbeat(2*time.Millisecond))
		require.NoError(t, err)
		for i := range 20 {
			_, err := e.Do(context.Background(), fmt.Sprint("k", i), "", func(context.Context) ([]byte, error) {
				time.Sleep(5 * time.Millisecond) // a beat is likely under way when fn returns
				return []byte("v"), nil
			})
			require.NoError(t, err)
			require.Zero(t, s.running.Load(), "a heartbeat's store call outlived Do")
		}
	})
}
