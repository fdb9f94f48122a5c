package idemkit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

func newEngine(t testing.TB, opts ...idemkit.Option) *idemkit.Engine {
	t.Helper()
	s := mustMem()
	t.Cleanup(func() { _ = s.Close() })
	e, err := idemkit.New(s, append([]idemkit.Option{idemkit.WithObserver(nil)}, opts...)...)
	require.NoError(t, err)
	return e
}

// recorder is an Observer that counts events by kind.
type recorder struct {
	mu     sync.Mutex
	events []idemkit.Event
}

func (r *recorder) Observe(_ context.Context, ev idemkit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) count(k idemkit.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func TestNewRejectsBadInput(t *testing.T) {
	_, err := idemkit.New(nil)
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	s := mustMem()
	defer s.Close()
	for name, opt := range map[string]idemkit.Option{
		"zero window":        idemkit.WithWindow(0),
		"negative lease":     idemkit.WithLease(-time.Second),
		"bad namespace":      idemkit.WithNamespace("a:b"),
		"empty namespace":    idemkit.WithNamespace(""),
		"bad release":        idemkit.WithRelease(idemkit.Release(9)),
		"bad failure mode":   idemkit.WithFailureMode(idemkit.FailureMode(7)),
		"zero result cap":    idemkit.WithMaxResultSize(0),
		"negative poll":      idemkit.WithWait(-time.Millisecond),
		"nil codec":          idemkit.WithCodec(nil),
		"zero heartbeat":     idemkit.WithHeartbeat(0),
		"zero token TTL":     idemkit.WithTokenTTL(0),
		"negative retryhint": idemkit.WithRetryHint(-1),
	} {
		_, err := idemkit.New(s, opt)
		assert.ErrorIs(t, err, idemkit.ErrInvalid, name)
	}
	e := newEngine(t)
	err = e.Guard(context.Background(), "k", func(context.Context) error { return nil }, idemkit.WithNamespace("other"))
	assert.ErrorIs(t, err, idemkit.ErrInvalid, "namespace per call")
	err = e.Guard(context.Background(), "", func(context.Context) error { return nil })
	assert.ErrorIs(t, err, idemkit.ErrInvalid, "empty key")
	_, err = e.Do(context.Background(), "", "", func(context.Context) ([]byte, error) { return nil, nil })
	assert.ErrorIs(t, err, idemkit.ErrInvalid, "empty key")
}

func TestGuardAdmitsExactlyOneOfManyConcurrent(t *testing.T) {
	e := newEngine(t, idemkit.WithWindow(time.Minute))
	for round := range 20 {
		key := fmt.Sprintf("fp-%d", round)
		var ran, dup atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				err := e.Guard(context.Background(), key, func(context.Context) error { ran.Add(1); return nil })
				if errors.Is(err, idemkit.ErrDuplicate) {
					d, ok := idemkit.RetryAfter(err)
					if ok && d > 0 && d <= time.Minute {
						dup.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, ran.Load(), "round %d", round)
		require.EqualValues(t, 63, dup.Load(), "round %d", round)
	}
}

func TestGuardReleaseBehaviours(t *testing.T) {
	ctx := context.Background()
	fail := errors.New("submit failed")
	cases := []struct {
		name        string
		release     idemkit.Release
		work        error
		secondRuns  bool
		description string
	}{
		{"keep after success", idemkit.KeepUntilExpiry, nil, false, "window holds"},
		{"keep after failure", idemkit.KeepUntilExpiry, fail, false, "window holds even on failure"},
		{"on error after failure", idemkit.ReleaseOnError, fail, true, "failure frees the key"},
		{"on error after success", idemkit.ReleaseOnError, nil, false, "success keeps the key"},
		{"on done after success", idemkit.ReleaseOnDone, nil, true, "done frees the key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithRelease(tc.release))
			err := e.Guard(ctx, "k", func(context.Context) error { return tc.work })
			require.ErrorIs(t, err, tc.work)
			ran := false
			err = e.Guard(ctx, "k", func(context.Context) error { ran = true; return nil })
			assert.Equal(t, tc.secondRuns, ran, tc.description)
			if !tc.secondRuns {
				assert.ErrorIs(t, err, idemkit.ErrDuplicate)
			}
		})
	}
}

func TestGuardWindowExpires(t *testing.T) {
	e := newEngine(t, idemkit.WithWindow(60*time.Millisecond))
	ctx := context.Background()
	require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { return nil }))
	require.ErrorIs(t, e.Guard(ctx, "k", func(context.Context) error { return nil }), idemkit.ErrDuplicate)
	time.Sleep(90 * time.Millisecond)
	require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { return nil }))
}

func TestGuardReleaseOnPanic(t *testing.T) {
	e := newEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithRelease(idemkit.ReleaseOnError))
	ctx := context.Background()
	require.Panics(t, func() {
		_ = e.Guard(ctx, "k", func(context.Context) error { panic("boom") })
	})
	require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { return nil }), "a panic released the key")
}

// TestGuardReleaseDeletesOnlyOwnClaim: a release after the window expired
// and another caller claimed the key must not delete the new claim.
func TestGuardReleaseDeletesOnlyOwnClaim(t *testing.T) {
	e := newEngine(t, idemkit.WithWindow(40*time.Millisecond), idemkit.WithRelease(idemkit.ReleaseOnDone))
	ctx := context.Background()
	second := make(chan error, 1)
	err := e.Guard(ctx, "k", func(context.Context) error {
		time.Sleep(70 * time.Millisecond) // the window expires under us
		second <- e.Guard(ctx, "k", func(context.Context) error { return nil }, idemkit.WithWindow(time.Minute), idemkit.WithRelease(idemkit.KeepUntilExpiry))
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, <-second)
	err = e.Guard(ctx, "k", func(context.Context) error { return nil })
	require.ErrorIs(t, err, idemkit.ErrDuplicate, "the first caller's release deleted the second caller's claim")
}

func TestDoRunsOnceUnderConcurrency(t *testing.T) {
	e := newEngine(t)
	for round := range 10 {
		key := fmt.Sprintf("order-%d", round)
		var runs atomic.Int32
		var wg sync.WaitGroup
		results := make([][]byte, 100)
		errs := make([]error, 100)
		start := make(chan struct{})
		for i := range 100 {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res, err := e.Do(ctx, key, "fp", func(context.Context) ([]byte, error) {
					n := runs.Add(1)
					time.Sleep(5 * time.Millisecond)
					return fmt.Appendf(nil, "created #%d", n), nil
				}, idemkit.WithWait(time.Millisecond))
				results[i], errs[i] = res.Value, err
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, runs.Load(), "fn ran more than once")
		for i := range 100 {
			require.NoError(t, errs[i])
			require.Equal(t, "created #1", string(results[i]))
		}
	}
}

func TestDoConcurrentDuplicateGetsInProgress(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	started, finish := make(chan struct{}), make(chan struct{})
	done := make(chan idemkit.Result)
	go func() {
		res, _ := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
			close(started)
			<-finish
			return []byte("ok"), nil
		})
		done <- res
	}()
	<-started
	_, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.ErrorIs(t, err, idemkit.ErrInProgress)
	d, ok := idemkit.RetryAfter(err)
	require.True(t, ok)
	assert.True(t, d > 0 && d <= idemkit.DefaultRetryHint, "retry hint %v", d)
	close(finish)
	assert.Equal(t, "ok", string((<-done).Value))
	res, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "ok", string(res.Value))
}

func TestDoWaitIsBoundedByContext(t *testing.T) {
	e := newEngine(t)
	started, finish := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) {
			close(started)
			<-finish
			return []byte("ok"), nil
		})
	}()
	<-started
	defer close(finish)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, nil }, idemkit.WithWait(5*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestDoFailureReleasesKey(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	_, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("db down") })
	require.EqualError(t, err, "db down")
	runs := 0
	res, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { runs++; return []byte("second"), nil })
	require.NoError(t, err)
	assert.Equal(t, 1, runs)
	assert.False(t, res.Replayed)
	assert.Equal(t, "second", string(res.Value))
}

func TestDoPanicReleasesKey(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	require.Panics(t, func() {
		_, _ = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { panic("boom") })
	})
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil })
	require.NoError(t, err)
	assert.Equal(t, "ran", string(res.Value))
}

func TestDoFinalErrorIsReplayed(t *testing.T) {
	errOutOfStock := errors.New("out of stock")
	e := newEngine(t, idemkit.WithErrorCodec(idemkit.FinalErrors(errOutOfStock)))
	ctx := context.Background()
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errOutOfStock })
	require.ErrorIs(t, err, errOutOfStock)
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("must not run"), nil })
	require.Error(t, err)
	var replayed *idemkit.ReplayedError
	require.ErrorAs(t, err, &replayed)
	assert.Equal(t, "out of stock", replayed.Message)
	require.ErrorIs(t, err, errOutOfStock, "a replayed final error keeps its identity")
	assert.True(t, res.Replayed)
	assert.Nil(t, res.Value)
}

func TestDoMismatch(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, idemkit.WithObserver(rec))
	ctx := context.Background()
	_, err := e.Do(ctx, "k", "payload-A", func(context.Context) ([]byte, error) { return []byte("A"), nil })
	require.NoError(t, err)
	_, err = e.Do(ctx, "k", "payload-B", func(context.Context) ([]byte, error) { return []byte("B"), nil })
	require.ErrorIs(t, err, idemkit.ErrMismatch)
	assert.Equal(t, 1, rec.count(idemkit.EventMismatch))
	// the mismatch check also applies while the first is in flight
	started, finish := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = e.Do(ctx, "k2", "payload-A", func(context.Context) ([]byte, error) { close(started); <-finish; return nil, nil })
	}()
	<-started
	_, err = e.Do(ctx, "k2", "payload-B", func(context.Context) ([]byte, error) { return nil, nil })
	close(finish)
	require.ErrorIs(t, err, idemkit.ErrMismatch)
}

func TestDoLeaseLostDoesNotOverwrite(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, idemkit.WithLease(50*time.Millisecond), idemkit.WithoutHeartbeat(), idemkit.WithObserver(rec))
	ctx := context.Background()
	secondDone := make(chan idemkit.Result, 1)
	res, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
		time.Sleep(80 * time.Millisecond) // the lease expires while we work
		r, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return []byte("second owner"), nil })
		require.NoError(t, err)
		secondDone <- r
		return []byte("first owner"), nil
	})
	require.ErrorIs(t, err, idemkit.ErrLeaseLost)
	assert.Equal(t, "first owner", string(res.Value), "fn's value is still returned")
	assert.False(t, (<-secondDone).Replayed)
	assert.Equal(t, 1, rec.count(idemkit.EventLeaseLost))
	res, err = e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.NoError(t, err)
	assert.Equal(t, "second owner", string(res.Value), "the late first owner overwrote the record")
}

func TestDoHeartbeatKeepsLongWorkClaimed(t *testing.T) {
	// Generous times: a loaded 2-core machine can delay a beat by 100ms.
	e := newEngine(t, idemkit.WithLease(400*time.Millisecond), idemkit.WithHeartbeat(100*time.Millisecond))
	ctx := context.Background()
	var duplicateErr error
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
		time.Sleep(1300 * time.Millisecond) // more than three leases
		_, duplicateErr = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("stolen"), nil })
		return []byte("mine"), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "mine", string(res.Value))
	require.ErrorIs(t, duplicateErr, idemkit.ErrInProgress, "the heartbeat did not keep the lease")
}

func TestDoResultTooLarge(t *testing.T) {
	e := newEngine(t, idemkit.WithMaxResultSize(8))
	ctx := context.Background()
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return bytes.Repeat([]byte("x"), 9), nil })
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("small"), nil })
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge, "the key was released")
	assert.True(t, res.Replayed)
	assert.Contains(t, err.Error(), "(9 bytes)")

	_, err = e.Do(ctx, "r", "", func(context.Context) ([]byte, error) { return bytes.Repeat([]byte("x"), 9), nil },
		idemkit.WithOversized(idemkit.ReleaseKey))
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err = e.Do(ctx, "r", "", func(context.Context) ([]byte, error) { return []byte("small"), nil })
	require.NoError(t, err, "ReleaseKey kept the key")
	assert.Equal(t, "small", string(res.Value))
}

func TestDoLongKeysAreHashedNotRejected(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	long := strings.Repeat("k", 10_000)
	_, err := e.Do(ctx, long, "", func(context.Context) ([]byte, error) { return []byte("1"), nil })
	require.NoError(t, err)
	res, err := e.Do(ctx, long, "", func(context.Context) ([]byte, error) { return []byte("2"), nil })
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	other := long[:len(long)-1] + "j"
	res, err = e.Do(ctx, other, "", func(context.Context) ([]byte, error) { return []byte("3"), nil })
	require.NoError(t, err)
	assert.False(t, res.Replayed)
}

func TestDoCorruptRecordIsAnError(t *testing.T) {
	s := mustMem()
	defer s.Close()
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()
	for name, v := range map[string][]byte{
		"unknown version": {9, 3, 0},
		"truncated":       {1, 3, 0, 0},
		"unknown state":   {1, 42},
		"empty":           {},
	} {
		key := "corrupt-" + strings.ReplaceAll(name, " ", "-")
		_, _, err := s.SetNX(ctx, idemkit.StoreKey(e, idemkit.ModeDo, "", key), v, time.Minute)
		require.NoError(t, err)
		_, err = e.Do(ctx, key, "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.ErrorIs(t, err, store.ErrCorrupt, name)
	}
}

func TestTypedDo(t *testing.T) {
	type order struct {
		ID  string `json:"id"`
		Qty int    `json:"qty"`
	}
	e := newEngine(t)
	ctx := context.Background()
	runs := 0
	create := func(context.Context) (order, error) { runs++; return order{ID: "o-1", Qty: 2}, nil }
	got, res, err := idemkit.Do(ctx, e, "k", "", create)
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.Equal(t, order{"o-1", 2}, got)
	got, res, err = idemkit.Do(ctx, e, "k", "", create)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, order{"o-1", 2}, got)
	assert.Equal(t, 1, runs)
	_, _, err = idemkit.Do(ctx, e, "k2", "", func(context.Context) (order, error) { return order{}, errors.New("nope") })
	require.EqualError(t, err, "nope")
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	ok := func(context.Context) ([]byte, error) { return []byte("paid"), nil }

	t.Run("used once then replayed", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, idemkit.DefaultTokenTTL, tok.ExpiresIn)
		res, err := e.UseToken(ctx, "alice", tok.Value, ok)
		require.NoError(t, err)
		assert.False(t, res.Replayed)
		res, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.NoError(t, err)
		assert.True(t, res.Replayed)
		assert.Equal(t, "paid", string(res.Value))
	})
	t.Run("other principal, forged, malformed", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "alice")
		require.NoError(t, err)
		_, err = e.UseToken(ctx, "mallory", tok.Value, ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		_, err = e.UseToken(ctx, "alice", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		_, err = e.UseToken(ctx, "alice", "not a token!", ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		_, err = e.UseToken(ctx, "alice", tok.Value, ok)
		require.NoError(t, err, "the other principal's attempt spent the owner's token")
	})
	t.Run("expired", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "bob", idemkit.WithTokenTTL(30*time.Millisecond))
		require.NoError(t, err)
		time.Sleep(60 * time.Millisecond)
		_, err = e.UseToken(ctx, "bob", tok.Value, ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
	})
	t.Run("failed use spends the token", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "carol")
		require.NoError(t, err)
		_, err = e.UseToken(ctx, "carol", tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("declined") })
		require.EqualError(t, err, "declined")
		_, err = e.UseToken(ctx, "carol", tok.Value, ok)
		require.ErrorIs(t, err, idemkit.ErrTokenUsed)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
	})
	t.Run("concurrent uses run once", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "dave")
		require.NoError(t, err)
		var runs, inProgress, replayed atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				res, err := e.UseToken(ctx, "dave", tok.Value, func(context.Context) ([]byte, error) {
					runs.Add(1)
					time.Sleep(20 * time.Millisecond)
					return []byte("once"), nil
				})
				switch {
				case errors.Is(err, idemkit.ErrInProgress):
					inProgress.Add(1)
				case err == nil && res.Replayed:
					replayed.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, runs.Load())
		assert.EqualValues(t, 63, inProgress.Load()+replayed.Load())
	})
}

func TestTokensAreUnique(t *testing.T) {
	e := newEngine(t)
	seen := map[string]bool{}
	for range 1000 {
		tok, err := e.IssueToken(context.Background(), "p")
		require.NoError(t, err)
		require.False(t, seen[tok.Value])
		seen[tok.Value] = true
	}
}

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
	mem := mustMem()
	defer mem.Close()
	fs := &flaky{Store: mem}
	fs.down.Store(true)

	t.Run("closed", func(t *testing.T) {
		rec := &recorder{}
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
		assert.Zero(t, rec.count(idemkit.EventFailOpen))
		assert.Equal(t, 4, rec.count(idemkit.EventStoreError))
	})
	t.Run("open", func(t *testing.T) {
		rec := &recorder{}
		e, err := idemkit.New(fs, idemkit.WithObserver(rec), idemkit.WithFailureMode(idemkit.FailOpen))
		require.NoError(t, err)
		runs := 0
		require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { runs++; return nil }))
		res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { runs++; return []byte("v"), nil })
		require.NoError(t, err)
		assert.True(t, res.Unguarded)
		assert.Equal(t, "v", string(res.Value))
		assert.Equal(t, 2, runs)
		assert.Equal(t, 2, rec.count(idemkit.EventFailOpen))
		for _, ev := range rec.events {
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

func TestSlogObserverNeverLogsRawKeys(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := idemkit.New(mustMem(), idemkit.WithObserver(idemkit.SlogObserver(l)))
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

func TestSettled(t *testing.T) {
	s := mustMem()
	defer s.Close()
	ctx := context.Background()
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWindow(time.Minute))
	require.NoError(t, err)
	value := func(key string) []byte {
		ent, err := s.Get(ctx, key)
		require.NoError(t, err)
		return ent.Value
	}
	require.NoError(t, e.Guard(ctx, "kept", func(context.Context) error { return nil }))
	assert.True(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeGuard, "", "kept"))))
	require.NoError(t, e.Guard(ctx, "rel", func(context.Context) error {
		assert.False(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeGuard, "", "rel"))), "a releasable claim")
		return nil
	}, idemkit.WithRelease(idemkit.ReleaseOnError)))
	_, err = e.Do(ctx, "do", "", func(context.Context) ([]byte, error) {
		assert.False(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeDo, "", "do"))), "in progress")
		return []byte("r"), nil
	})
	require.NoError(t, err)
	assert.True(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeDo, "", "do"))), "completed")
	assert.False(t, idemkit.Settled([]byte("junk")))
	assert.False(t, idemkit.Settled(nil))
}

// quirky is a Store that misreports in the two ways real backends can:
// SetNX that wrote but returns an error (replicas did not confirm), and
// SetNX that wrote but reports the caller's own value as existing (a retry
// after a lost reply).
type quirky struct {
	store.Store
	mode string
}

func (q *quirky) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	set, existing, err := q.Store.SetNX(ctx, k, v, ttl)
	switch q.mode {
	case "wrote-but-failed":
		return set, existing, store.Unavailable("setnx", errors.New("NOREPLICAS"))
	case "lost-reply":
		if set {
			ent, gerr := q.Store.Get(ctx, k)
			return false, ent, gerr
		}
	}
	return set, existing, err
}

func TestClaimInterpretsMisreportingStores(t *testing.T) {
	ctx := context.Background()
	mem := mustMem()
	defer mem.Close()

	q := &quirky{Store: mem, mode: "wrote-but-failed"}
	e, err := idemkit.New(q, idemkit.WithObserver(nil))
	require.NoError(t, err)
	_, err = e.Do(ctx, "k1", "", func(context.Context) ([]byte, error) { return []byte("x"), nil })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	_, err = mem.Get(ctx, idemkit.StoreKey(e, idemkit.ModeDo, "", "k1"))
	require.ErrorIs(t, err, store.ErrNotFound, "a claim reported as failed must be undone")

	q.mode = "lost-reply"
	runs := 0
	res, err := e.Do(ctx, "k2", "", func(context.Context) ([]byte, error) { runs++; return []byte("x"), nil })
	require.NoError(t, err, "our own claim read back must count as ours")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, runs)
	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }))
}

// mustMem returns a memory store, failing loudly on invalid options.
func mustMem(opts ...memstore.Option) *memstore.Store {
	s, err := memstore.New(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// TestUseTokenOwnClaimReadBackCountsAsOurs: a token claim whose swap the
// store applied but reported as not applied (a client library retried the
// swap after losing its reply, and the retry found the value changed) is
// this caller's own claim, recognised by its unique owner nonce, as Do's
// claim is: fn runs, instead of the caller getting ErrInProgress for its
// own claim and the token dying with the lease.
func TestUseTokenOwnClaimReadBackCountsAsOurs(t *testing.T) {
	ctx := context.Background()
	mem := mustMem()
	defer mem.Close()
	s := &casRetried{Store: mem}
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)
	s.on.Store(true)
	runs := 0
	res, err := e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { runs++; return []byte("x"), nil })
	require.NoError(t, err, "our own claim read back must count as ours")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, runs)
	res, err = e.UseToken(ctx, "alice", tok.Value, nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
}

// casRetried applies the first swap of an unused token and reports it as
// not applied, as a retried swap whose first attempt landed does.
type casRetried struct {
	store.Store
	on atomic.Bool
}

func (s *casRetried) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	ok, err := s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
	if ok && s.on.CompareAndSwap(true, false) {
		return false, nil
	}
	return ok, err
}

// TestCompleteRecordedButReportedNotAppliedSucceeds: a completion whose
// swap the store applied but reported as not applied (a retried command
// after a lost reply) recorded this claim's result: Complete reads the key
// back and succeeds, instead of reporting ErrLeaseLost ("nothing was
// recorded") for a result every repeat now gets.
func TestCompleteRecordedButReportedNotAppliedSucceeds(t *testing.T) {
	ctx := context.Background()
	mem := mustMem()
	defer mem.Close()
	s := &casRetried{Store: mem}
	var lost atomic.Int32
	e, err := idemkit.New(s, idemkit.WithObserver(idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventLeaseLost {
			lost.Add(1)
		}
	})))
	require.NoError(t, err)
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	s.on.Store(true)
	require.NoError(t, c.Complete(ctx, []byte("v")))
	assert.Zero(t, lost.Load())
	res, err := e.Do(ctx, "k", "", nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "v", string(res.Value))
}
