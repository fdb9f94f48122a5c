package idemlambda_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// A first invocation that times out (Lambda stops it at its deadline: its
// handler never returns) leaves a claim whose lease ends with the
// deadline, so the retry runs once the deadline has passed, although the
// engine's own lease is an hour. Before the deadline the retry is in
// progress, with a retry hint no longer than the time left.
func TestTimedOutInvocationDoesNotBlockItsRetry(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		var runs atomic.Int64
		stuck := make(chan struct{})
		t.Cleanup(func() { close(stuck) })
		h, err := idemlambda.Wrap(e, "orders", func(ctx context.Context, o order) (receipt, error) {
			if runs.Add(1) == 1 {
				<-stuck // the timed-out invocation: stopped, it never answers
				return receipt{}, errors.New("stopped")
			}
			return receipt{Receipt: "r-" + o.OrderID}, nil
		}, idemlambda.WithKeyPath("orderId"))
		require.NoError(t, err)

		const timeout = 400 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		deadline, _ := ctx.Deadline()
		go func() { _, _ = h(ctx, order{OrderID: "o-1"}) }()
		testkitWait(t, "the first invocation to start", func() bool { return runs.Load() == 1 })

		_, err = h(context.Background(), order{OrderID: "o-1"})
		if time.Now().Before(deadline) { // a loaded machine may get here late
			require.ErrorIs(t, err, idemkit.ErrInProgress)
			hint, ok := idemkit.RetryAfter(err)
			require.True(t, ok)
			require.LessOrEqual(t, hint, timeout)
		}
		var got receipt
		testkitWait(t, "the retry to run", func() bool {
			got, err = h(context.Background(), order{OrderID: "o-1"})
			return err == nil
		})
		require.Equal(t, "r-o-1", got.Receipt)
		require.False(t, time.Now().Before(deadline), "the retry ran before the first invocation's deadline")
		require.EqualValues(t, 2, runs.Load())
	}, idemkit.WithLease(time.Hour))
}

// An invocation with less than the shortest lease left fails with
// context.DeadlineExceeded and does not run.
func TestInvocationAtItsDeadlineDoesNotRun(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	c := &counter{}
	h, err := idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyPath("orderId"))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	_, err = h(ctx, order{OrderID: "o-1"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, c.runs.Load())
}
