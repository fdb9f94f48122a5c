package idemkit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// valuerStore is a store.SetNXValuer over a memstore that counts the
// claims it serves each way. Its SetNXValue is SetNX without the TTL;
// armed, its next SetNXValue that stores reports the write as failed, as
// redisstore does when WAIT is not confirmed.
type valuerStore struct {
	store.Store
	setNX, setNXValue atomic.Int64
	failAfterWrite    atomic.Bool
}

func (s *valuerStore) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	s.setNX.Add(1)
	return s.Store.SetNX(ctx, k, v, ttl)
}

func (s *valuerStore) SetNXValue(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, []byte, error) {
	s.setNXValue.Add(1)
	set, e, err := s.Store.SetNX(ctx, k, v, ttl)
	if err == nil && set && s.failAfterWrite.CompareAndSwap(true, false) {
		return true, nil, store.Unavailable("setnxvalue", errors.New("NOREPLICAS: applied on the primary only"))
	}
	return set, e.Value, err
}

var _ store.SetNXValuer = (*valuerStore)(nil)

func newValuer(t *testing.T) *valuerStore {
	return &valuerStore{Store: testkit.NewMem(t)}
}

// counts returns the SetNX and SetNXValue calls so far.
func (s *valuerStore) counts() [2]int64 {
	return [2]int64{s.setNX.Load(), s.setNXValue.Load()}
}

// Do and Begin claim through SetNXValue when the store offers it, in both
// outcomes (a first execution and a replay); Guard, whose answer is the
// window's remaining time, keeps SetNX and still reports it.
func TestDoClaimsWithSetNXValue(t *testing.T) {
	ctx := context.Background()
	s := newValuer(t)
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	fn := func(context.Context) ([]byte, error) { return []byte("result"), nil }

	res, err := e.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, [2]int64{0, 1}, s.counts(), "first execution")

	res, err = e.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, []byte("result"), res.Value)
	require.Equal(t, [2]int64{0, 2}, s.counts(), "replay")

	c, res, err := e.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	require.Nil(t, c)
	require.True(t, res.Replayed)
	require.Equal(t, [2]int64{0, 3}, s.counts(), "Begin")

	_, err = e.Do(ctx, "k", "other", fn)
	require.ErrorIs(t, err, idemkit.ErrMismatch)
	require.Equal(t, [2]int64{0, 4}, s.counts(), "mismatch")

	g, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWindow(time.Minute))
	require.NoError(t, err)
	require.NoError(t, g.Guard(ctx, "g", func(context.Context) error { return nil }))
	err = g.Guard(ctx, "g", func(context.Context) error { return nil })
	require.ErrorIs(t, err, idemkit.ErrDuplicate)
	retry, ok := idemkit.RetryAfter(err)
	require.True(t, ok)
	require.Greater(t, retry, 50*time.Second, "Guard's retry-after is the window's remaining time")
	require.Equal(t, [2]int64{2, 4}, s.counts(), "Guard uses SetNX")
}

// A store without the capability is claimed with SetNX, and a view on
// another store (OnStore) uses that store's capability, not the engine's.
func TestClaimFollowsTheStoresCapability(t *testing.T) {
	ctx := context.Background()
	s := newValuer(t)
	plain := struct{ store.Store }{s} // hides SetNXValue
	e, err := idemkit.New(plain, idemkit.WithObserver(nil))
	require.NoError(t, err)
	fn := func(context.Context) ([]byte, error) { return []byte("r"), nil }

	_, err = e.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 0}, s.counts())

	v, err := e.OnStore(s)
	require.NoError(t, err)
	res, err := v.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, [2]int64{1, 1}, s.counts(), "the view claims with SetNXValue")

	w, err := e.With(idemkit.WithRetryHint(time.Second))
	require.NoError(t, err)
	_, err = w.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.Equal(t, [2]int64{2, 1}, s.counts(), "With keeps the engine's store")
}

// A repeat that finds the first execution running through SetNXValue,
// which reads no TTL, reads the record's TTL to tell whether the lease has
// ended, and gets ErrInProgress with what is left of the lease, capped by
// the retry hint; not the 1 ms floor a zero TTL would give, nor the tail
// the record keeps after its lease. The observer sees the same hint.
func TestInProgressHintWithoutTTL(t *testing.T) {
	ctx := context.Background()
	s := newValuer(t)
	var seen atomic.Int64
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventInProgress {
			seen.Store(int64(ev.RetryAfter))
		}
	})
	e, err := idemkit.New(s, idemkit.WithObserver(obs), idemkit.WithRetryHint(700*time.Millisecond))
	require.NoError(t, err)

	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 2)
	go func() {
		_, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte("r"), nil
		})
		done <- err
	}()
	<-started

	_, err = e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.ErrorIs(t, err, idemkit.ErrInProgress)
	retry, ok := idemkit.RetryAfter(err)
	require.True(t, ok)
	require.Equal(t, 700*time.Millisecond, retry)
	require.Equal(t, int64(700*time.Millisecond), seen.Load())

	started2 := make(chan struct{})
	go func() {
		_, err := e.Do(ctx, "k2", "fp", func(context.Context) ([]byte, error) {
			close(started2)
			<-release
			return []byte("r"), nil
		}, idemkit.WithLease(time.Minute), idemkit.WithoutHeartbeat())
		done <- err
	}()
	<-started2
	_, err = e.Do(ctx, "k2", "fp", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") },
		idemkit.WithRetryHint(2*time.Minute))
	retry, _ = idemkit.RetryAfter(err)
	require.LessOrEqual(t, retry, time.Minute, "what is left of the running claim's lease bounds the hint")
	require.Greater(t, retry, 50*time.Second, "the hint is the lease left, not the cap nor the floor")

	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	require.Zero(t, s.setNX.Load())
}

// A SetNXValue claim applied but reported as failed is undone, as a SetNX
// claim is: the caller is told the store failed, nothing ran, and a retry
// runs.
func TestSetNXValueClaimReportedFailedIsUndone(t *testing.T) {
	ctx := context.Background()
	s := newValuer(t)
	var ambiguous atomic.Int64
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventAmbiguous {
			ambiguous.Add(1)
		}
	})
	e, err := idemkit.New(s, idemkit.WithObserver(obs))
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("r"), nil }

	s.failAfterWrite.Store(true)
	_, err = e.Do(ctx, "k", "fp", fn)
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	require.Zero(t, runs)
	require.Equal(t, int64(1), ambiguous.Load())

	res, err := e.Do(ctx, "k", "fp", fn)
	require.NoError(t, err)
	require.False(t, res.Replayed, "the undone claim must not block the retry")
	require.Equal(t, 1, runs)
}

// Concurrent Do calls with one key over a SetNXValuer run fn once; with
// WithWait every other caller gets the result replayed.
func TestDoRaceOverSetNXValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := newValuer(t)
		e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWait(time.Millisecond))
		require.NoError(t, err)
		const callers = 32
		var runs atomic.Int64
		var wg sync.WaitGroup
		results := make([]idemkit.Result, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
					runs.Add(1)
					time.Sleep(20 * time.Millisecond)
					return []byte("r"), nil
				})
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, int64(1), runs.Load())
		replayed := 0
		for i := range callers {
			require.NoError(t, errs[i])
			require.Equal(t, []byte("r"), results[i].Value)
			if results[i].Replayed {
				replayed++
			}
		}
		require.Equal(t, callers-1, replayed)
		require.Zero(t, s.setNX.Load())
	})
}
