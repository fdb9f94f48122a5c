package idemfunc_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/idemkit/idemkit/store/storetest"
)

type msg struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

func byID(m msg) (string, error) { return m.ID, nil }

// wrap is Wrap failing the test on a configuration error.
func wrap[Resp any](t *testing.T, e *idemkit.Engine, name string, fn idemfunc.Func[msg, Resp], opts ...idemfunc.Option[msg]) idemfunc.Idempotent[msg, Resp] {
	t.Helper()
	h, err := idemfunc.Wrap(e, name, byID, fn, opts...)
	require.NoError(t, err)
	return h
}

func TestRedeliveryRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		h := wrap(t, testkit.NewEngine(t), "handle", func(_ context.Context, m msg) (string, error) {
			runs.Add(1)
			time.Sleep(2 * time.Millisecond)
			return "handled " + m.Body, nil
		}, idemfunc.WithEngineOptions[msg](idemkit.WithWait(time.Millisecond)))
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				got, res, err := h(context.Background(), msg{ID: "m-1", Body: "hello"})
				assert.NoError(t, err)
				assert.Equal(t, "handled hello", got)
				if !res.Replayed {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, runs.Load())
		assert.EqualValues(t, 1, fresh.Load(), "every other call is told it got a replay")
	})
}

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

func TestErrorsReleaseTheKey(t *testing.T) {
	fails := true
	h := wrap(t, testkit.NewEngine(t), "handle", func(context.Context, msg) (int, error) {
		if fails {
			fails = false
			return 0, errors.New("downstream timeout")
		}
		return 7, nil
	})
	_, _, err := h(context.Background(), msg{ID: "m"})
	require.EqualError(t, err, "downstream timeout")
	got, res, err := h(context.Background(), msg{ID: "m"})
	require.NoError(t, err)
	assert.Equal(t, 7, got)
	assert.False(t, res.Replayed)
}

func TestBadKeysAndMismatch(t *testing.T) {
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

	h := wrap(t, e, "handle", fn, idemfunc.WithJSONFingerprint[msg]())
	_, _, err = h(context.Background(), msg{ID: "x", Body: "a"})
	require.NoError(t, err)
	_, _, err = h(context.Background(), msg{ID: "x", Body: "b"})
	require.ErrorIs(t, err, idemkit.ErrMismatch)
}

// The JSON fingerprint compares the whole payload: no field is dropped as
// volatile, whatever its name.
func TestJSONFingerprintComparesEveryField(t *testing.T) {
	type payment struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
		Sign   string `json:"sign"`
	}
	fn := func(context.Context, payment) (int, error) { return 1, nil }
	h, err := idemfunc.Wrap(testkit.NewEngine(t), "pay", func(p payment) (string, error) { return p.ID, nil }, fn, idemfunc.WithJSONFingerprint[payment]())
	require.NoError(t, err)
	_, _, err = h(context.Background(), payment{ID: "p", Amount: 100, Sign: "+"})
	require.NoError(t, err)
	_, _, err = h(context.Background(), payment{ID: "p", Amount: 100, Sign: "-"})
	require.ErrorIs(t, err, idemkit.ErrMismatch)
}

func TestWrapRefusesInvalidArguments(t *testing.T) {
	e := testkit.NewEngine(t)
	fn := func(context.Context, msg) (int, error) { return 1, nil }
	cases := map[string]func() error{
		"nil engine":   func() error { _, err := idemfunc.Wrap(nil, "n", byID, fn); return err },
		"nil key func": func() error { _, err := idemfunc.Wrap(e, "n", nil, fn); return err },
		"nil fn":       func() error { _, err := idemfunc.Wrap[msg, int](e, "n", byID, nil); return err },
		"empty name":   func() error { _, err := idemfunc.Wrap(e, "", byID, fn); return err },
		"long name": func() error {
			_, err := idemfunc.Wrap(e, strings.Repeat("n", idemfunc.MaxNameLen+1), byID, fn)
			return err
		},
		"name w/ space":  func() error { _, err := idemfunc.Wrap(e, "send email", byID, fn); return err },
		"non-ASCII name": func() error { _, err := idemfunc.Wrap(e, "envoi-é", byID, fn); return err },
		"nil option":     func() error { _, err := idemfunc.Wrap(e, "n", byID, fn, nil); return err },
		"nil fingerprint": func() error {
			_, err := idemfunc.Wrap(e, "n", byID, fn, idemfunc.WithFingerprint[msg](nil))
			return err
		},
		"bad engine option": func() error {
			_, err := idemfunc.Wrap(e, "n", byID, fn, idemfunc.WithEngineOptions[msg](idemkit.WithRetention(0)))
			return err
		},
	}
	for name, wrapErr := range cases {
		assert.ErrorIs(t, wrapErr(), idemkit.ErrInvalid, name)
	}
	_, err := idemfunc.Wrap(e, strings.Repeat("n", idemfunc.MaxNameLen), byID, fn)
	assert.NoError(t, err, "a name of MaxNameLen bytes")
}

var errDeclined = errors.New("card declined")

// A final error registered with idemkit.FinalErrors keeps its identity on
// replay: errors.Is holds for the replay as for the first call, and fn
// does not run again.
func TestFinalErrorsKeepTheirIdentityOnReplay(t *testing.T) {
	runs := 0
	h := wrap(t, testkit.NewEngine(t), "charge", func(context.Context, msg) (int, error) {
		runs++
		return 0, fmt.Errorf("charge %d: %w", runs, errDeclined)
	}, idemfunc.WithEngineOptions[msg](idemkit.WithErrorCodec(idemkit.FinalErrors(errDeclined))))
	_, res, first := h(context.Background(), msg{ID: "m"})
	require.ErrorIs(t, first, errDeclined)
	assert.False(t, res.Replayed)
	for range 2 {
		_, res, err := h(context.Background(), msg{ID: "m"})
		require.ErrorIs(t, err, errDeclined, "the replay is still the declined error")
		assert.Equal(t, first.Error(), err.Error())
		assert.True(t, res.Replayed)
	}
	assert.Equal(t, 1, runs)
}
