package idemfunc_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/store/memstore"
)

type msg struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

func newEngine(t *testing.T) *idemkit.Engine {
	s := memstore.New()
	t.Cleanup(func() { _ = s.Close() })
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	return e
}

func byID(m msg) (string, error) { return m.ID, nil }

func TestRedeliveryRunsOnce(t *testing.T) {
	var runs atomic.Int32
	h := idemfunc.Wrap(newEngine(t), byID, func(_ context.Context, m msg) (string, error) {
		runs.Add(1)
		time.Sleep(2 * time.Millisecond)
		return "handled " + m.Body, nil
	}, idemfunc.WithCallOptions[msg](idemkit.WithWait(time.Millisecond)))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			got, err := h(context.Background(), msg{ID: "m-1", Body: "hello"})
			assert.NoError(t, err)
			assert.Equal(t, "handled hello", got)
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, runs.Load())
}

func TestErrorsReleaseTheKey(t *testing.T) {
	fails := true
	h := idemfunc.Wrap(newEngine(t), byID, func(context.Context, msg) (int, error) {
		if fails {
			fails = false
			return 0, errors.New("downstream timeout")
		}
		return 7, nil
	})
	_, err := h(context.Background(), msg{ID: "m"})
	require.EqualError(t, err, "downstream timeout")
	got, err := h(context.Background(), msg{ID: "m"})
	require.NoError(t, err)
	assert.Equal(t, 7, got)
}

func TestBadKeysAndMismatch(t *testing.T) {
	e := newEngine(t)
	ran := false
	fn := func(context.Context, msg) (int, error) { ran = true; return 1, nil }
	_, err := idemfunc.Wrap(e, func(msg) (string, error) { return "", errors.New("no id") }, fn)(context.Background(), msg{})
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	_, err = idemfunc.Wrap(e, byID, fn)(context.Background(), msg{})
	require.ErrorIs(t, err, idemkit.ErrInvalid, "empty key")
	assert.False(t, ran)

	h := idemfunc.Wrap(e, byID, fn, idemfunc.WithJSONFingerprint[msg]())
	_, err = h(context.Background(), msg{ID: "x", Body: "a"})
	require.NoError(t, err)
	_, err = h(context.Background(), msg{ID: "x", Body: "b"})
	require.ErrorIs(t, err, idemkit.ErrMismatch)
}
