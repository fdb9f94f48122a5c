package idemkit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flaky is a Store whose operations fail with ErrUnavailable while down.
type flaky struct {
	store.Store
	down atomic.Bool
}

func (f *flaky) err() error {
	return store.Unavailable("test", errors.New("connection refused"))
}

func (f *flaky) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if f.down.Load() {
		return false, store.Entry{}, f.err()
	}
	return f.Store.SetNX(ctx, k, v, ttl)
}

func (f *flaky) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if f.down.Load() {
		return false, f.err()
	}
	return f.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func TestFailureModes(t *testing.T) {
	ctx := context.Background()
	mem := testkit.NewMem(t)
	fs := &flaky{Store: mem}
	fs.down.Store(true)

	t.Run("closed", func(t *testing.T) {
		rec := &testkit.Recorder{}
		e, err := idemkit.New(fs, idemkit.WithObserver(rec))
		require.NoError(t, err)
		ran := false
		err = e.Guard(ctx, "k", func(context.Context) error { ran = true; return nil })
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		_, err = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		_, err = e.UseToken(ctx, "p", "AAAAAAAAAAAAAAAAAAAAAA", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		_, err = e.IssueToken(ctx, "p")
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		assert.False(t, ran, "fail-closed ran work unprotected")
		assert.Zero(t, rec.Count(idemkit.EventFailOpen))
		assert.Equal(t, 4, rec.Count(idemkit.EventStoreError))
	})
	t.Run("open", func(t *testing.T) {
		rec := &testkit.Recorder{}
		e, err := idemkit.New(fs, idemkit.WithObserver(rec), idemkit.WithFailureMode(idemkit.FailOpen))
		require.NoError(t, err)
		runs := 0
		require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { runs++; return nil }))
		res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { runs++; return []byte("v"), nil })
		require.NoError(t, err)
		assert.True(t, res.Unguarded)
		assert.Equal(t, "v", string(res.Value))
		assert.Equal(t, 2, runs)
		assert.Equal(t, 2, rec.Count(idemkit.EventFailOpen))
		for _, ev := range rec.Events() {
			if ev.Kind == idemkit.EventFailOpen {
				assert.ErrorIs(t, ev.Err, store.ErrUnavailable, "the event carries the cause")
			}
		}
	})
	t.Run("per call override", func(t *testing.T) {
		e, err := idemkit.New(fs, idemkit.WithObserver(nil))
		require.NoError(t, err)
		ran := false
		require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { ran = true; return nil }, idemkit.WithFailureMode(idemkit.FailOpen)))
		assert.True(t, ran)
	})
	t.Run("recording fails after fn ran", func(t *testing.T) {
		fs2 := &flaky{Store: mem}
		e, err := idemkit.New(fs2, idemkit.WithObserver(nil))
		require.NoError(t, err)
		res, err := e.Do(ctx, "rec", "", func(context.Context) ([]byte, error) { fs2.down.Store(true); return []byte("v"), nil })
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		assert.Equal(t, "v", string(res.Value))
	})
}
