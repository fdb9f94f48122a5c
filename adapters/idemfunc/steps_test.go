package idemfunc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

// A wrapped function runs steps in its context: a redelivery after a
// failure skips the steps the first delivery recorded.
func TestWrappedFunctionStepsResume(t *testing.T) {
	var reserved, charged atomic.Int32
	var down atomic.Bool
	down.Store(true)
	h := wrap(t, testkit.NewEngine(t), "handle", func(ctx context.Context, m msg) (string, error) {
		if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) { reserved.Add(1); return nil, nil }); err != nil {
			return "", err
		}
		v, err := idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
			charged.Add(1)
			if down.Load() {
				return nil, errors.New("provider down")
			}
			return []byte("charged " + m.Body), nil
		})
		return string(v), err
	})
	_, _, err := h(context.Background(), msg{ID: "m-1", Body: "pen"})
	require.EqualError(t, err, "provider down")
	down.Store(false)
	got, res, err := h(context.Background(), msg{ID: "m-1", Body: "pen"})
	require.NoError(t, err)
	assert.Equal(t, "charged pen", got)
	assert.False(t, res.Replayed)
	assert.EqualValues(t, 1, reserved.Load())
	assert.EqualValues(t, 2, charged.Load())
}
