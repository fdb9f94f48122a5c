package idemlambda_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// EventBridge events are keyed by their id: a redelivery replays, another
// event with the same detail runs; the same id with another detail is a
// mismatch.
func TestEventBridgeKeysByID(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		var runs atomic.Int64
		h, err := idemlambda.EventBridge(e, "shipping", func(_ context.Context, ev events.EventBridgeEvent) (string, error) {
			runs.Add(1)
			return "label-" + ev.ID, nil
		})
		require.NoError(t, err)
		ev := load[events.EventBridgeEvent](t, "eventbridge.json")
		for range 3 {
			got, err := h(context.Background(), ev)
			require.NoError(t, err)
			require.Equal(t, "label-"+ev.ID, got)
		}
		require.EqualValues(t, 1, runs.Load())
		other := ev
		other.ID = "0b7c3f5e-1111-4c2a-9e0d-2f6a7b8c9d0e"
		_, err = h(context.Background(), other)
		require.NoError(t, err)
		require.EqualValues(t, 2, runs.Load())
		changed := ev
		changed.Detail = []byte(`{"orderId":"o-43"}`)
		_, err = h(context.Background(), changed)
		require.ErrorIs(t, err, idemkit.ErrMismatch)
		require.EqualValues(t, 2, runs.Load())
	})
}
