package idemkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

func TestWithViewSharesClaimsAndKeepsItsOptions(t *testing.T) {
	e := testkit.NewEngine(t)
	view, err := e.With(idemkit.WithWindow(time.Hour), idemkit.WithFailureMode(idemkit.FailOpen))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, view.Guard(ctx, "fp", func(context.Context) error { return nil }))
	err = e.Guard(ctx, "fp", func(context.Context) error { return nil })
	require.ErrorIs(t, err, idemkit.ErrDuplicate, "a view claims in the engine's key space")
	d, ok := idemkit.RetryAfter(err)
	require.True(t, ok)
	assert.Greater(t, d, 59*time.Minute, "the view's window applies")
	assert.Same(t, e.Store(), view.Store())
}

func TestWithRejectsBadOptions(t *testing.T) {
	e := testkit.NewEngine(t)
	for name, opt := range map[string]idemkit.Option{
		"invalid window":    idemkit.WithWindow(0),
		"namespace":         idemkit.WithNamespace("other"),
		"readable keys":     idemkit.WithReadableKeys(),
		"scope is per call": idemkit.WithScope("alice"),
		"clock":             idemkit.WithClock(time.Now),
		"nil clock":         idemkit.WithClock(nil),
	} {
		v, err := e.With(opt)
		require.ErrorIs(t, err, idemkit.ErrInvalid, name)
		assert.Nil(t, v, name)
	}
	_, err := idemkit.New(testkit.NewEngine(t).Store(), idemkit.WithScope("alice"))
	require.ErrorIs(t, err, idemkit.ErrInvalid, "a scope is never engine-wide")
	_, err = idemkit.New(testkit.NewEngine(t).Store(), idemkit.WithClock(nil))
	require.ErrorIs(t, err, idemkit.ErrInvalid, "a nil clock")
	_, err = e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return nil, nil }, idemkit.WithReadableKeys())
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}
