package idemkit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

func TestInspectReportsEachState(t *testing.T) {
	rec := &testkit.Recorder{}
	e := testkit.NewEngine(t, idemkit.WithObserver(rec), idemkit.WithErrorCodec(idemkit.FinalErrors(errDeclined)))
	ctx := context.Background()
	alice := idemkit.WithScope("alice")

	_, err := e.Inspect(ctx, idemkit.ModeDo, "k", alice)
	require.ErrorIs(t, err, store.ErrNotFound)

	c, _, err := e.Begin(ctx, "k", "fingerprint", alice)
	require.NoError(t, err)
	info, err := e.Inspect(ctx, idemkit.ModeDo, "k", alice)
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateInProgress, info.State)
	assert.NotEmpty(t, info.FingerprintDigest)
	assert.NotContains(t, info.FingerprintDigest, "fingerprint")
	assert.WithinDuration(t, time.Now(), info.Created, time.Minute)
	require.NoError(t, c.Complete(ctx, []byte("12345")))
	info, err = e.Inspect(ctx, idemkit.ModeDo, "k", alice)
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateCompleted, info.State)
	assert.Equal(t, 5, info.ResultSize)
	body, err := e.StoredResult(ctx, idemkit.ModeDo, "k", alice)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(body))
	_, err = e.StoredResult(ctx, idemkit.ModeDo, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "another scope")
	assert.Greater(t, info.TTL, time.Hour)

	_, err = e.Do(ctx, "f", "", func(context.Context) ([]byte, error) { return nil, errDeclined })
	require.Error(t, err)
	info, err = e.Inspect(ctx, idemkit.ModeDo, "f")
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateFailed, info.State)

	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }))
	info, err = e.Inspect(ctx, idemkit.ModeGuard, "g")
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateClaimed, info.State)

	tok, err := e.IssueToken(ctx, "bob")
	require.NoError(t, err)
	info, err = e.Inspect(ctx, idemkit.ModeToken, tok.Value, idemkit.WithScope("bob"))
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateIssued, info.State)
	_, err = e.UseToken(ctx, "bob", tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("transient") })
	require.Error(t, err)
	info, err = e.Inspect(ctx, idemkit.ModeToken, tok.Value, idemkit.WithScope("bob"))
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateSpent, info.State)

	_, err = e.Inspect(ctx, "nonsense", "k")
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}

// A crash leaves an in-progress record; Forget lets the retry run at once.
func TestForgetUnblocksAStuckKey(t *testing.T) {
	rec := &testkit.Recorder{}
	e := testkit.NewEngine(t, idemkit.WithObserver(rec), idemkit.WithoutHeartbeat())
	ctx := context.Background()
	stuck, _, err := e.Begin(ctx, "order-9", "")
	require.NoError(t, err)
	require.NotNil(t, stuck) // never ended: the process "crashed"
	_, err = e.Do(ctx, "order-9", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.ErrorIs(t, err, idemkit.ErrInProgress)

	forgot, err := e.Forget(ctx, idemkit.ModeDo, "order-9")
	require.NoError(t, err)
	assert.True(t, forgot)
	assert.Equal(t, 1, rec.Count(idemkit.EventForgotten))
	res, err := e.Do(ctx, "order-9", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil })
	require.NoError(t, err)
	assert.Equal(t, "ran", string(res.Value))

	forgot, err = e.Forget(ctx, idemkit.ModeDo, "never-seen")
	require.NoError(t, err)
	assert.False(t, forgot)
}

func TestModeOfStoreKey(t *testing.T) {
	e := testkit.NewEngine(t)
	for _, mode := range []idemkit.Mode{idemkit.ModeGuard, idemkit.ModeDo, idemkit.ModeToken} {
		got, ok := idemkit.ModeOfStoreKey(idemkit.StoreKey(e, mode, "s", "k"))
		assert.True(t, ok)
		assert.Equal(t, mode, got)
	}
	_, ok := idemkit.ModeOfStoreKey("other:x")
	assert.False(t, ok)
}

// TestClockStampsRecords shows that WithClock sets the Created and Updated
// stamps Inspect reports, and nothing about expiry: an engine an hour
// ahead of another on one store sees the other's claim in progress and
// its result replayed, with the same remaining TTL.
func TestClockStampsRecords(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := at
	e := testkit.NewEngine(t, idemkit.WithClock(func() time.Time { return now }))
	ahead, err := idemkit.New(e.Store(), idemkit.WithClock(func() time.Time { return now.Add(time.Hour) }))
	require.NoError(t, err)

	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	_, err = ahead.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("twice"), nil })
	require.ErrorIs(t, err, idemkit.ErrInProgress, "a clock an hour ahead must not take over a live claim")
	now = at.Add(time.Minute)
	require.NoError(t, c.Complete(ctx, []byte("once")))

	info, err := ahead.Inspect(ctx, idemkit.ModeDo, "k")
	require.NoError(t, err)
	assert.Equal(t, at, info.Created.UTC())
	assert.Equal(t, at.Add(time.Minute), info.Updated.UTC())
	res, err := ahead.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("twice"), nil })
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "once", string(res.Value))
}

// TestWaiterStampsTheRecordItClaims: a WithWait caller that claims the key
// after waiting stamps its record with the time it claimed it, not the
// time it started waiting, so Inspect's Created is when the work began.
func TestWaiterStampsTheRecordItClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		var now atomic.Int64
		now.Store(at.UnixMilli())
		e := testkit.NewEngine(t, idemkit.WithClock(func() time.Time { return time.UnixMilli(now.Load()) }))
		holder, _, err := e.Begin(ctx, "k", "")
		require.NoError(t, err)
		created := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			_, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
				info, err := e.Inspect(ctx, idemkit.ModeDo, "k")
				if err != nil {
					return nil, err
				}
				created <- info.Created.UTC()
				return []byte("v"), nil
			}, idemkit.WithWait(time.Millisecond))
			done <- err
		}()
		time.Sleep(20 * time.Millisecond) // the waiter polls
		now.Store(at.Add(time.Minute).UnixMilli())
		holder.Release(ctx)
		require.NoError(t, <-done)
		assert.Equal(t, at.Add(time.Minute), <-created, "the waiter's record was stamped when it began waiting")
	})
}
