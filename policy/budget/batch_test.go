package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// A budgeted store over a store.Batcher is one (it used to hide it), and
// the batch runs under the budget: a batch the store never answers is cut
// off at it, and a later call on one of its keys waits for it.
func TestBudgetBatchRunsUnderTheBudget(t *testing.T) {
	f := newFaulty(t)
	s := mustBudget(t, f, 50*time.Millisecond)
	b, ok := s.(store.Batcher)
	require.True(t, ok, "a budgeted memstore hides SetNXBatch")
	res, err := b.SetNXBatch(ctx, []store.BatchItem{{Key: "a", Value: []byte("1"), TTL: time.Minute}, {Key: "a", Value: []byte("2"), TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, res[0].Set)
	require.False(t, res[1].Set)

	f.Set(hanging)
	start := time.Now()
	_, err = b.SetNXBatch(ctx, []store.BatchItem{{Key: "x", Value: []byte("1"), TTL: time.Minute}, {Key: "y", Value: []byte("1"), TTL: time.Minute}})
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), hangDetector)

	// The cut-off batch is still running: a call on its key y waits for
	// it, within its own budget, and reports so.
	f.Set(healthy)
	_, err = s.CompareAndDelete(ctx, "y", []byte("1"))
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.ErrorContains(t, err, "cut off at its budget, is still running")
	// A key the batch did not hold is not held up.
	_, err = s.Get(ctx, "a")
	assert.NoError(t, err)
}
