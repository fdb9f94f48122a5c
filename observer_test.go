package idemkit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// A panicking observer must not leave a claim held or a call unanswered.
func TestObserverPanicsAreRecovered(t *testing.T) {
	panicky := idemkit.ObserverFunc(func(context.Context, idemkit.Event) { panic("observer bug") })
	e := testkit.NewEngine(t, idemkit.WithObserver(panicky))
	ctx := context.Background()
	runs := 0
	fail := func(context.Context) ([]byte, error) { runs++; return nil, errors.New("transient") }
	for range 2 {
		_, err := e.Do(ctx, "k", "", fail) // admitted, then released: both report
		require.EqualError(t, err, "transient")
	}
	assert.Equal(t, 2, runs, "the released key runs again")
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	res, err = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.NoError(t, err)
	assert.True(t, res.Replayed)

	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }, idemkit.WithRelease(idemkit.ReleaseOnDone)))
	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }), "released despite the observer")
}

func TestAmbiguousClaimIsUndoneAndReported(t *testing.T) {
	mem := testkit.NewMem(t)
	rec := &testkit.Recorder{}
	e, err := idemkit.New(&quirky{Store: mem, mode: "wrote-but-failed"}, idemkit.WithObserver(rec))
	require.NoError(t, err)
	ctx := context.Background()
	err = e.Guard(ctx, "g", func(context.Context) error { return errors.New("must not run") })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	assert.Equal(t, 1, rec.Count(idemkit.EventAmbiguous))
	_, err = mem.Get(ctx, idemkit.StoreKey(e, idemkit.ModeGuard, "", "g"))
	require.Error(t, err, "the claim was undone before the caller was answered")
}

type ctxKey struct{}

// tracer is an Observer and Tracer that records spans and which events
// arrived inside them.
type tracer struct {
	mu     sync.Mutex
	spans  []string
	inSpan map[idemkit.EventKind]int
	done   []idemkit.Event
}

func (tr *tracer) Start(ctx context.Context, mode idemkit.Mode, op string) (context.Context, func(error)) {
	return context.WithValue(ctx, ctxKey{}, op), func(err error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.spans = append(tr.spans, fmt.Sprintf("%s/%s err=%v", mode, op, err != nil))
	}
}

func (tr *tracer) Observe(ctx context.Context, ev idemkit.Event) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if ctx.Value(ctxKey{}) != nil {
		tr.inSpan[ev.Kind]++
	}
	if ev.Kind == idemkit.EventCompleted {
		tr.done = append(tr.done, ev)
	}
}

func TestTracerSpansEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &tracer{inSpan: map[idemkit.EventKind]int{}}
		e := testkit.NewEngine(t, idemkit.WithObserver(tr))
		ctx := context.Background()
		work := func(ctx context.Context) ([]byte, error) {
			assert.Equal(t, "Do", ctx.Value(ctxKey{}), "fn runs inside the call's span")
			time.Sleep(2 * time.Millisecond)
			return []byte("v"), nil
		}
		_, err := e.Do(ctx, "k", "", work)
		require.NoError(t, err)
		_, err = e.Do(ctx, "k", "other", work)
		require.ErrorIs(t, err, idemkit.ErrMismatch)
		require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }))
		tok, err := e.IssueToken(ctx, "p")
		require.NoError(t, err)
		_, err = e.UseToken(ctx, "p", tok.Value, func(context.Context) ([]byte, error) { return nil, nil })
		require.NoError(t, err)
		c, _, err := e.Begin(ctx, "b", "")
		require.NoError(t, err)
		c.Release(ctx)

		assert.Equal(t, []string{"do/Do err=false", "do/Do err=true", "guard/Guard err=false",
			"token/IssueToken err=false", "token/UseToken err=false", "do/Begin err=false"}, tr.spans)
		assert.Equal(t, 4, tr.inSpan[idemkit.EventAdmitted], "admissions are observed inside their span")
		assert.Equal(t, 1, tr.inSpan[idemkit.EventMismatch])
		require.Len(t, tr.done, 2, "Do and UseToken completed")
		assert.GreaterOrEqual(t, tr.done[0].Duration, 2*time.Millisecond, "the work's duration")
	})
}

// panickyTracer is a Tracer whose Start or end panics, and an Observer
// that panics too.
type panickyTracer struct{ inStart bool }

func (p panickyTracer) Observe(context.Context, idemkit.Event) { panic("observer bug") }

func (p panickyTracer) Start(ctx context.Context, _ idemkit.Mode, _ string) (context.Context, func(error)) {
	if p.inStart {
		panic("tracer Start bug")
	}
	return ctx, func(error) { panic("tracer end bug") }
}

// A Tracer is the engine's observer too: its panics, in Start or in end,
// are recovered like an Observer's. None may escape to the caller, and
// none may lose a claim the call made (Begin's end runs after the claim is
// taken: a panic there would drop the Claim while its heartbeat keeps the
// key held).
func TestTracerPanicsAreRecovered(t *testing.T) {
	for _, inStart := range []bool{true, false} {
		t.Run(fmt.Sprintf("inStart=%v", inStart), func(t *testing.T) {
			e := testkit.NewEngine(t, idemkit.WithObserver(panickyTracer{inStart: inStart}), idemkit.WithLease(time.Minute))
			ctx := context.Background()
			ok := func(context.Context) ([]byte, error) { return []byte("ok"), nil }

			var (
				c   *idemkit.Claim
				err error
			)
			require.NotPanics(t, func() { c, _, err = e.Begin(ctx, "b", "") }, "Begin")
			require.NoError(t, err)
			require.NotNil(t, c, "Begin returns its claim")
			require.NoError(t, c.Complete(ctx, []byte("done")))
			var res idemkit.Result
			require.NotPanics(t, func() { res, err = e.Do(ctx, "b", "", ok) }, "Do replay")
			require.NoError(t, err)
			assert.True(t, res.Replayed)
			assert.Equal(t, "done", string(res.Value))

			require.NotPanics(t, func() { res, err = e.Do(ctx, "d", "", ok) }, "Do")
			require.NoError(t, err)
			assert.False(t, res.Replayed)
			require.NotPanics(t, func() {
				err = e.Guard(ctx, "g", func(context.Context) error { return nil }, idemkit.WithRelease(idemkit.ReleaseOnDone))
			}, "Guard")
			require.NoError(t, err)
			require.NotPanics(t, func() { err = e.Guard(ctx, "g", func(context.Context) error { return nil }) }, "Guard again")
			require.NoError(t, err, "the first Guard released its claim")

			var tok idemkit.Token
			require.NotPanics(t, func() { tok, err = e.IssueToken(ctx, "p") }, "IssueToken")
			require.NoError(t, err)
			require.NotPanics(t, func() { res, err = e.UseToken(ctx, "p", tok.Value, ok) }, "UseToken")
			require.NoError(t, err)
			assert.Equal(t, "ok", string(res.Value))
		})
	}
}

func TestSlogObserverNeverLogsRawKeys(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := idemkit.New(testkit.NewMem(t), idemkit.WithObserver(idemkit.SlogObserver(l)))
	require.NoError(t, err)
	ctx := context.Background()
	secret := "user-42:card-4111111111111111"
	require.NoError(t, e.Guard(ctx, secret, func(context.Context) error { return nil }))
	require.ErrorIs(t, e.Guard(ctx, secret, func(context.Context) error { return nil }), idemkit.ErrDuplicate)
	out := buf.String()
	assert.Contains(t, out, "idemkit: admitted")
	assert.Contains(t, out, "idemkit: duplicate")
	assert.Contains(t, out, "key_digest=")
	assert.NotContains(t, out, "4111")
}

// keyNamingStore fails every operation while down with an error that names
// the key, as redisstore (WAIT not confirmed, other replies) and boltstore
// (corrupt entries, the contract's ErrCorrupt rule) do.
type keyNamingStore struct {
	store.Store
	down atomic.Bool
}

func (s *keyNamingStore) fail(op, key string) error {
	return fmt.Errorf("fakestore: %s %q: the write was applied on the primary, but not replicated: %w", op, key, store.ErrUnavailable)
}

func (s *keyNamingStore) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if s.down.Load() {
		return false, store.Entry{}, s.fail("setnx", k)
	}
	return s.Store.SetNX(ctx, k, v, ttl)
}

func (s *keyNamingStore) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, s.fail("cas", k)
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

// The default observer promises never to log raw keys, but it logs store
// errors verbatim, and stores name the key in their errors: idempotency
// keys and one-time tokens (credentials) end up in the logs.
func TestSlogObserverRedactsKeysInStoreErrors(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := &keyNamingStore{Store: testkit.NewMem(t)}
	e, err := idemkit.New(s, idemkit.WithObserver(idemkit.SlogObserver(l)))
	require.NoError(t, err)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)

	s.down.Store(true)
	secret := "user-42-card-4111111111111111"
	_, err = e.Do(ctx, secret, "", func(context.Context) ([]byte, error) { return nil, nil })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	_, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return nil, nil })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)

	out := buf.String()
	require.Contains(t, out, "idemkit: store_error")
	assert.NotContains(t, out, "4111111111111111", "raw idempotency key logged")
	assert.NotContains(t, out, tok.Value, "raw one-time token logged")
}
