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
	"github.com/idemkit/idemkit/internal/testkit"
)

// Two consumers of one event, keyed by its ID, each run once: the second
// never gets the first one's result (an e-mail not sent) nor fails to
// decode it. Many deliveries race on both.
func TestWrappersHaveTheirOwnKeySpace(t *testing.T) {
	e := testkit.NewEngine(t)
	var sent, charged atomic.Int32
	email := wrap(t, e, "send-email", func(context.Context, msg) (string, error) { sent.Add(1); return "sent", nil },
		idemfunc.WithEngineOptions[msg](idemkit.WithWait(time.Millisecond)))
	charge := wrap(t, e, "charge", func(context.Context, msg) (int, error) { charged.Add(1); return 42, nil },
		idemfunc.WithEngineOptions[msg](idemkit.WithWait(time.Millisecond)))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			s, _, err := email(context.Background(), msg{ID: "evt-1"})
			assert.NoError(t, err)
			assert.Equal(t, "sent", s)
		})
		wg.Go(func() {
			n, _, err := charge(context.Background(), msg{ID: "evt-1"})
			assert.NoError(t, err)
			assert.Equal(t, 42, n)
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, sent.Load(), "e-mails sent")
	assert.EqualValues(t, 1, charged.Load(), "charges made")
}

// A wrapper's keys cannot meet keys other callers give the same engine:
// a record under the event's bare ID is not the wrapper's.
func TestWrapperKeysDoNotMeetOtherCallers(t *testing.T) {
	e := testkit.NewEngine(t)
	_, err := e.Do(context.Background(), "evt-1", "", func(context.Context) ([]byte, error) { return []byte(`"other"`), nil })
	require.NoError(t, err)
	h := wrap(t, e, "handle", func(context.Context, msg) (string, error) { return "mine", nil })
	got, res, err := h(context.Background(), msg{ID: "evt-1"})
	require.NoError(t, err)
	assert.Equal(t, "mine", got)
	assert.False(t, res.Replayed)
}

// A key function's error and an empty key are refused as invalid, and fn
// does not run.
func TestBadKeysAreRefused(t *testing.T) {
	e := testkit.NewEngine(t)
	ran := false
	fn := func(context.Context, msg) (int, error) { ran = true; return 1, nil }
	noID, err := idemfunc.Wrap(e, "handle", func(msg) (string, error) { return "", errors.New("no id") }, fn)
	require.NoError(t, err)
	_, _, err = noID(context.Background(), msg{})
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	_, _, err = wrap(t, e, "handle", fn)(context.Background(), msg{})
	require.ErrorIs(t, err, idemkit.ErrInvalid, "empty key")
	assert.False(t, ran)
}
