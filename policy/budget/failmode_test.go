package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

func TestFailOpenRunsAndRecords(t *testing.T) {
	f := newFaulty(t)
	f.Set(failing)
	e, log := newEngine(t, f, idemkit.WithFailureMode(idemkit.FailOpen))

	ran := 0
	for range 2 { // a duplicate runs too: nothing guards it
		err := e.Guard(ctx, "req", func(context.Context) error { ran++; return nil })
		require.NoError(t, err)
	}
	res, err := e.Do(ctx, "pay-1", "fp", func(context.Context) ([]byte, error) { ran++; return []byte("ok"), nil })
	require.NoError(t, err)
	assert.True(t, res.Unguarded)
	assert.Equal(t, []byte("ok"), res.Value)

	assert.Equal(t, 3, ran)
	opens := log.Of(idemkit.EventFailOpen)
	require.Len(t, opens, 3, "every unguarded run is recorded")
	for _, ev := range opens {
		assert.ErrorIs(t, ev.Err, store.ErrUnavailable, "the event carries the cause")
		assert.ErrorIs(t, ev.Err, errInjected)
	}
	assert.Empty(t, log.Of(idemkit.EventAdmitted))
}

func TestFailClosedRefusesAndDoesNotRun(t *testing.T) {
	f := newFaulty(t)
	f.Set(failing)
	for name, opts := range map[string][]idemkit.Option{
		"default":  nil,
		"explicit": {idemkit.WithFailureMode(idemkit.FailClosed)},
	} {
		e, log := newEngine(t, f, opts...)
		ran := false
		err := e.Guard(ctx, "req", func(context.Context) error { ran = true; return nil })
		assert.ErrorIs(t, err, idemkit.ErrUnavailable, name)
		_, err = e.Do(ctx, "pay-1", "fp", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
		assert.ErrorIs(t, err, idemkit.ErrUnavailable, name)
		assert.False(t, ran, name)
		assert.Empty(t, log.Of(idemkit.EventFailOpen), name)
		assert.Len(t, log.Of(idemkit.EventStoreError), 2, name)
	}
}

func TestFailureModePerCall(t *testing.T) {
	f := newFaulty(t)
	f.Set(failing)
	e, log := newEngine(t, f) // fail-closed engine
	ran := false
	err := e.Guard(ctx, "req", func(context.Context) error { ran = true; return nil },
		idemkit.WithFailureMode(idemkit.FailOpen))
	require.NoError(t, err)
	assert.True(t, ran)
	assert.Len(t, log.Of(idemkit.EventFailOpen), 1)
}

// A store that hangs, behind a budget, is an outage like any other: the
// failure mode decides, within about the budget.
func TestBudgetTurnsHungStoreIntoFailureMode(t *testing.T) {
	f := newFaulty(t)
	f.Set(hanging)
	s := mustBudget(t, f, 50*time.Millisecond)

	closed, _ := newEngine(t, s)
	ran := false
	start := time.Now()
	err := closed.Guard(ctx, "req", func(context.Context) error { ran = true; return nil })
	assert.Less(t, time.Since(start), hangDetector)
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	assert.False(t, ran)

	open, log := newEngine(t, s, idemkit.WithFailureMode(idemkit.FailOpen))
	err = open.Guard(ctx, "req", func(context.Context) error { ran = true; return nil })
	require.NoError(t, err)
	assert.True(t, ran)
	opens := log.Of(idemkit.EventFailOpen)
	require.Len(t, opens, 1)
	assert.ErrorIs(t, opens[0].Err, context.DeadlineExceeded)
}
