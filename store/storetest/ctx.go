package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// ctxCases check operations under a context that is already done. A store
// may still perform the operation (an in-memory store need not look at
// ctx), but if it reports an error the error wraps ctx.Err() and nothing
// changed. For a passed deadline the error also wraps ErrUnavailable.
func ctxCases() []testCase {
	return []testCase{
		{"Context/Cancelled", func(t *testing.T, s store.Store) { testDoneCtx(t, s, cancelledCtx()) }},
		{"Context/DeadlineExceeded", func(t *testing.T, s store.Store) { testDoneCtx(t, s, expiredCtx(t)) }},
	}
}

// cancelledCtx returns a context that is already cancelled.
func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// expiredCtx returns a context whose deadline has passed.
func expiredCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	return ctx
}

// requireCtxErr asserts that a failed operation under a done ctx reports
// ctx.Err() (and ErrUnavailable for a deadline), and returns whether the
// operation failed.
func requireCtxErr(t *testing.T, ctx context.Context, err error, op string) (failed bool) {
	t.Helper()
	if err == nil {
		return false
	}
	require.ErrorIs(t, err, ctx.Err(), "%s under a done context failed with another error", op)
	if ctx.Err() == context.DeadlineExceeded {
		require.ErrorIs(t, err, store.ErrUnavailable, "%s past its deadline must wrap ErrUnavailable", op)
	}
	return true
}

func testDoneCtx(t *testing.T, s store.Store, ctx context.Context) {
	for _, k := range []string{"get", "cas", "cad", "consume"} {
		mustSet(t, s, k, []byte("v"), longTTL)
	}
	doneSetNX(t, s, ctx)
	doneGet(t, s, ctx)
	doneCAS(t, s, ctx)
	doneCAD(t, s, ctx)
	doneConsume(t, s, ctx)
}

func doneSetNX(t *testing.T, s store.Store, ctx context.Context) {
	set, _, err := s.SetNX(ctx, "nx", []byte("v"), longTTL)
	if requireCtxErr(t, ctx, err, "SetNX") {
		requireAbsent(t, s, "nx")
		return
	}
	require.True(t, set)
	requireValue(t, s, "nx", []byte("v"))
}

func doneGet(t *testing.T, s store.Store, ctx context.Context) {
	e, err := s.Get(ctx, "get")
	if !requireCtxErr(t, ctx, err, "Get") {
		require.Equal(t, []byte("v"), e.Value)
		requireValidTTL(t, e.TTL)
	}
	requireValue(t, s, "get", []byte("v"))
}

func doneCAS(t *testing.T, s store.Store, ctx context.Context) {
	ok, err := s.CompareAndSwap(ctx, "cas", []byte("v"), []byte("w"), longTTL)
	if requireCtxErr(t, ctx, err, "CompareAndSwap") {
		requireValue(t, s, "cas", []byte("v"))
		return
	}
	require.True(t, ok)
	requireValue(t, s, "cas", []byte("w"))
}

func doneCAD(t *testing.T, s store.Store, ctx context.Context) {
	ok, err := s.CompareAndDelete(ctx, "cad", []byte("v"))
	if requireCtxErr(t, ctx, err, "CompareAndDelete") {
		requireValue(t, s, "cad", []byte("v"))
		return
	}
	require.True(t, ok)
	requireAbsent(t, s, "cad")
}

func doneConsume(t *testing.T, s store.Store, ctx context.Context) {
	v, err := s.Consume(ctx, "consume")
	if requireCtxErr(t, ctx, err, "Consume") {
		requireValue(t, s, "consume", []byte("v"))
		return
	}
	require.Equal(t, []byte("v"), v)
	requireAbsent(t, s, "consume")
}
