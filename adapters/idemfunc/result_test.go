package idemfunc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/storetest"
)

// The Result says whether a call was replayed, and whether it ran
// unguarded because the store failed under FailOpen.
func TestResultSaysReplayedAndUnguarded(t *testing.T) {
	h := wrap(t, testkit.NewEngine(t), "handle", func(context.Context, msg) (int, error) { return 7, nil })
	for i, replayed := range []bool{false, true} {
		got, res, err := h(context.Background(), msg{ID: "m"})
		require.NoError(t, err)
		assert.Equal(t, 7, got)
		assert.Equal(t, replayed, res.Replayed, "call %d", i)
		assert.False(t, res.Unguarded)
	}

	down, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context, msg) (int, error) { runs++; return 8, nil }
	open := wrap(t, down, "handle", fn, idemfunc.WithEngineOptions[msg](idemkit.WithFailureMode(idemkit.FailOpen)))
	got, res, err := open(context.Background(), msg{ID: "m"})
	require.NoError(t, err)
	assert.Equal(t, 8, got)
	assert.True(t, res.Unguarded)
	assert.False(t, res.Replayed)

	closed := wrap(t, down, "handle", fn)
	_, res, err = closed(context.Background(), msg{ID: "m"})
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	assert.False(t, res.Unguarded)
	assert.Equal(t, 1, runs)
}
