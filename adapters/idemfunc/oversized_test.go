package idemfunc_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestOversizedResultIsNeverRunAgain redelivers one message many times at
// once to a wrapper whose result is over the engine's cap: fn runs once,
// its caller gets the result with ErrResultTooLarge, and every other
// delivery, then and later, gets ErrResultTooLarge marked replayed.
func TestOversizedResultIsNeverRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		big := strings.Repeat("r", 200)
		h := wrap(t, testkit.NewEngine(t, idemkit.WithMaxResultSize(64)), "report", func(_ context.Context, _ msg) (string, error) {
			runs.Add(1)
			time.Sleep(20 * time.Millisecond)
			return big, nil
		}, idemfunc.WithEngineOptions[msg](idemkit.WithWait(time.Millisecond)))
		const n = 30
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				got, res, err := h(context.Background(), msg{ID: "m-1"})
				assert.ErrorIs(t, err, idemkit.ErrResultTooLarge)
				if !res.Replayed {
					fresh.Add(1)
					assert.Equal(t, big, got, "the delivery that ran gets fn's result")
					return
				}
				assert.Empty(t, got)
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, runs.Load(), "fn runs")
		assert.EqualValues(t, 1, fresh.Load())
		for range 3 {
			_, res, err := h(context.Background(), msg{ID: "m-1"})
			require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
			assert.True(t, res.Replayed)
		}
		assert.EqualValues(t, 1, runs.Load(), "a redelivery ran fn again")
	})
}

// TestOversizedResultReleaseKey: with idemkit.ReleaseKey in the wrapper's
// engine options, a redelivery runs fn again; another wrapper over the same
// engine keeps the default.
func TestOversizedResultReleaseKey(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithMaxResultSize(64))
	var runs atomic.Int32
	fn := func(_ context.Context, _ msg) (string, error) { runs.Add(1); return strings.Repeat("r", 200), nil }
	release := wrap(t, e, "release", fn, idemfunc.WithEngineOptions[msg](idemkit.WithOversized(idemkit.ReleaseKey)))
	keep := wrap(t, e, "keep", fn)
	for i := range 3 {
		_, res, err := release(context.Background(), msg{ID: "m-1"})
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
		assert.False(t, res.Replayed)
		assert.EqualValues(t, i+1, runs.Load())
	}
	for range 3 {
		_, _, err := keep(context.Background(), msg{ID: "m-1"})
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	}
	assert.EqualValues(t, 4, runs.Load())

	_, err := idemfunc.Wrap(e, "bad", byID, fn, idemfunc.WithEngineOptions[msg](idemkit.WithOversized(5)))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}
