package idemlambda_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

type order struct {
	OrderID string `json:"orderId"`
	Qty     int    `json:"qty"`
	Note    string `json:"note"`
}

type receipt struct {
	Receipt string `json:"receipt"`
	Runs    int64  `json:"runs"`
}

// counter is a handler that counts its runs and answers with the count.
type counter struct{ runs atomic.Int64 }

func (c *counter) handle(_ context.Context, o order) (receipt, error) {
	n := c.runs.Add(1)
	return receipt{Receipt: "r-" + o.OrderID, Runs: n}, nil
}

// A repeat of a key returns the first result, decoded; another key runs.
func TestWrapRunsOncePerKey(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		c := &counter{}
		h, err := idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyPath("orderId"))
		require.NoError(t, err)
		ctx := context.Background()
		first, err := h(ctx, order{OrderID: "o-1", Qty: 1})
		require.NoError(t, err)
		again, err := h(ctx, order{OrderID: "o-1", Qty: 1})
		require.NoError(t, err)
		require.Equal(t, first, again)
		other, err := h(ctx, order{OrderID: "o-2", Qty: 1})
		require.NoError(t, err)
		require.Equal(t, receipt{"r-o-2", 2}, other)
		require.EqualValues(t, 2, c.runs.Load())
	})
}

// Many concurrent invocations of one event run the handler once; the
// others get ErrInProgress with a retry hint, or the stored result.
func TestWrapConcurrentDuplicatesRunOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		const n = 32
		var runs atomic.Int64
		release := make(chan struct{})
		h, err := idemlambda.Wrap(e, "orders", func(_ context.Context, o order) (receipt, error) {
			runs.Add(1)
			<-release
			return receipt{Receipt: "r-" + o.OrderID}, nil
		}, idemlambda.WithKeyPath("orderId"))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var inProgress atomic.Int64
		start := make(chan struct{})
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				<-start
				_, err := h(context.Background(), order{OrderID: "o-race"})
				if errors.Is(err, idemkit.ErrInProgress) {
					if d, ok := idemkit.RetryAfter(err); !ok || d <= 0 {
						errs <- errors.New("in progress without a retry hint")
					}
					inProgress.Add(1)
					return
				}
				errs <- err
			})
		}
		close(start)
		testkitWait(t, "the duplicates to be refused", func() bool { return inProgress.Load() == n-1 })
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, runs.Load())
	})
}

// A final error (the engine's ErrorCodec) is replayed with its
// classification: errors.Is holds on the replay; any other error frees
// the key, so a retry runs again.
func TestWrapReplaysFinalErrors(t *testing.T) {
	errDeclined := errors.New("card declined")
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		var runs atomic.Int64
		h, err := idemlambda.Wrap(e, "pay", func(_ context.Context, o order) (receipt, error) {
			runs.Add(1)
			switch o.Note {
			case "declined":
				return receipt{}, errors.Join(errors.New("charge o-1"), errDeclined)
			case "flaky":
				return receipt{}, errors.New("gateway timeout")
			}
			return receipt{Receipt: "paid"}, nil
		}, idemlambda.WithKeyPath("orderId"),
			idemlambda.WithEngineOptions(idemkit.WithErrorCodec(idemkit.FinalErrors(errDeclined))))
		require.NoError(t, err)
		ctx := context.Background()
		for range 2 {
			_, err := h(ctx, order{OrderID: "o-1", Note: "declined"})
			require.ErrorIs(t, err, errDeclined)
		}
		require.EqualValues(t, 1, runs.Load(), "a final error is replayed, not run again")
		for range 2 {
			_, err := h(ctx, order{OrderID: "o-2", Note: "flaky"})
			require.ErrorContains(t, err, "gateway timeout")
		}
		require.EqualValues(t, 3, runs.Load(), "a transient error frees the key")
	})
}

// WithKeyFunc takes the key from the typed event; a function of another
// event type is refused when the handler is built.
func TestWrapKeyFunc(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	c := &counter{}
	h, err := idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyFunc(func(o order) (string, error) { return o.OrderID, nil }))
	require.NoError(t, err)
	for range 3 {
		_, err := h(context.Background(), order{OrderID: "o-1"})
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, c.runs.Load())
	_, err = idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyFunc(func(ev events.SQSMessage) (string, error) { return ev.MessageId, nil }))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	require.ErrorContains(t, err, "events.SQSMessage")
	require.ErrorContains(t, err, "idemlambda_test.order")
}
