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
)

// An operation claimed with WithInput whose caller died after its first
// step is resumed by its store key: the recorded step is skipped, the
// rest runs with the stored input, and the client's late retry gets the
// result.
func TestResumeFinishesAnAbandonedOperation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat())
		var reserved, charged atomic.Int32
		place := func(ctx context.Context, input []byte) ([]byte, error) {
			if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) {
				reserved.Add(1)
				return nil, nil
			}); err != nil {
				return nil, err
			}
			return idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
				charged.Add(1)
				return append([]byte("charged for "), input...), nil
			})
		}
		funcs := idemkit.Funcs{"place-order": place}
		c, _, err := e.Begin(ctx, "order-1", "fp", idemkit.WithInput("place-order", []byte("pen")))
		require.NoError(t, err)
		_, err = idemkit.Step(c.Context(ctx), "reserve", func(context.Context) ([]byte, error) {
			reserved.Add(1)
			return nil, nil
		})
		require.NoError(t, err)
		sk := idemkit.StoreKey(e, idemkit.ModeDo, "", "order-1")

		_, err = e.Resume(ctx, sk, funcs)
		require.ErrorIs(t, err, idemkit.ErrNotAbandoned, "its lease still runs")
		time.Sleep(50 * time.Millisecond) // the caller died

		_, err = e.Resume(ctx, sk, idemkit.Funcs{"other": place})
		require.ErrorIs(t, err, idemkit.ErrNoFunction)
		res, err := e.Resume(ctx, sk, funcs)
		require.NoError(t, err, "nothing was claimed by the refused resume")
		assert.Equal(t, "charged for pen", string(res.Value))
		assert.EqualValues(t, 1, reserved.Load())
		assert.EqualValues(t, 1, charged.Load())

		res, err = e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.NoError(t, err)
		assert.True(t, res.Replayed)
		assert.Equal(t, "charged for pen", string(res.Value))
		_, err = e.Resume(ctx, sk, funcs)
		require.ErrorIs(t, err, idemkit.ErrNotAbandoned, "it finished")
		require.ErrorIs(t, c.Complete(ctx, nil), idemkit.ErrLeaseLost)
	})
}

// An operation claimed without WithInput cannot be resumed; a key outside
// the Do space is refused.
func TestResumeRefusesWhatItCannotResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat())
		_, _, err := e.Begin(ctx, "k", "")
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
		_, err = e.Resume(ctx, idemkit.StoreKey(e, idemkit.ModeDo, "", "k"), idemkit.Funcs{})
		require.ErrorIs(t, err, idemkit.ErrNoInput)
		_, err = e.Resume(ctx, idemkit.StoreKey(e, idemkit.ModeGuard, "", "k"), idemkit.Funcs{})
		require.ErrorIs(t, err, idemkit.ErrInvalid)
		_, err = e.Resume(ctx, idemkit.StoreKey(e, idemkit.ModeDo, "", "absent"), idemkit.Funcs{})
		require.ErrorIs(t, err, idemkit.ErrNotAbandoned)
	})
}

// Many completers resume one abandoned operation at once: one runs it.
func TestResumeRaceOneWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat())
		_, _, err := e.Begin(ctx, "k", "", idemkit.WithInput("op", nil))
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
		var runs, won atomic.Int32
		funcs := idemkit.Funcs{"op": func(context.Context, []byte) ([]byte, error) { runs.Add(1); return []byte("done"), nil }}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if _, err := e.Resume(ctx, idemkit.StoreKey(e, idemkit.ModeDo, "", "k"), funcs); err == nil {
					won.Add(1)
				} else {
					assert.ErrorIs(t, err, idemkit.ErrNotAbandoned)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, runs.Load())
		assert.EqualValues(t, 1, won.Load())
	})
}
