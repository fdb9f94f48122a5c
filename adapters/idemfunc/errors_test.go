package idemfunc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// An error from fn releases the key: the next call runs fn again.
func TestErrorsReleaseTheKey(t *testing.T) {
	fails := true
	h := wrap(t, testkit.NewEngine(t), "handle", func(context.Context, msg) (int, error) {
		if fails {
			fails = false
			return 0, errors.New("downstream timeout")
		}
		return 7, nil
	})
	_, _, err := h(context.Background(), msg{ID: "m"})
	require.EqualError(t, err, "downstream timeout")
	got, res, err := h(context.Background(), msg{ID: "m"})
	require.NoError(t, err)
	assert.Equal(t, 7, got)
	assert.False(t, res.Replayed)
}

var errDeclined = errors.New("card declined")

// A final error registered with idemkit.FinalErrors keeps its identity on
// replay: errors.Is holds for the replay as for the first call, and fn
// does not run again.
func TestFinalErrorsKeepTheirIdentityOnReplay(t *testing.T) {
	runs := 0
	h := wrap(t, testkit.NewEngine(t), "charge", func(context.Context, msg) (int, error) {
		runs++
		return 0, fmt.Errorf("charge %d: %w", runs, errDeclined)
	}, idemfunc.WithEngineOptions[msg](idemkit.WithErrorCodec(idemkit.FinalErrors(errDeclined))))
	_, res, first := h(context.Background(), msg{ID: "m"})
	require.ErrorIs(t, first, errDeclined)
	assert.False(t, res.Replayed)
	for range 2 {
		_, res, err := h(context.Background(), msg{ID: "m"})
		require.ErrorIs(t, err, errDeclined, "the replay is still the declined error")
		assert.Equal(t, first.Error(), err.Error())
		assert.True(t, res.Replayed)
	}
	assert.Equal(t, 1, runs)
}
