package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDoRunsOnceUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t)
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
	})
}

func TestDoConcurrentDuplicateGetsInProgress(t *testing.T) {
	e := testkit.NewEngine(t)
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
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t)
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
	})
}

func TestDoFailureReleasesKey(t *testing.T) {
	e := testkit.NewEngine(t)
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
	e := testkit.NewEngine(t)
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
	e := testkit.NewEngine(t, idemkit.WithErrorCodec(idemkit.FinalErrors(errOutOfStock)))
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
	rec := &testkit.Recorder{}
	e := testkit.NewEngine(t, idemkit.WithObserver(rec))
	ctx := context.Background()
	_, err := e.Do(ctx, "k", "payload-A", func(context.Context) ([]byte, error) { return []byte("A"), nil })
	require.NoError(t, err)
	_, err = e.Do(ctx, "k", "payload-B", func(context.Context) ([]byte, error) { return []byte("B"), nil })
	require.ErrorIs(t, err, idemkit.ErrMismatch)
	assert.Equal(t, 1, rec.Count(idemkit.EventMismatch))
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

func TestDoLongKeysAreHashedNotRejected(t *testing.T) {
	e := testkit.NewEngine(t)
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
	s := testkit.NewMem(t)
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
	e := testkit.NewEngine(t)
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

// A fn that ends its goroutine with runtime.Goexit (t.FailNow or
// require.* inside fn, as this package's own tests do) neither panics nor
// returns: the heartbeat is never stopped and keeps the key claimed
// forever (and the timer beats the store forever).
func TestDoGoexitInFnDoesNotLockKeyForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, idemkit.WithLease(60*time.Millisecond), idemkit.WithHeartbeat(10*time.Millisecond))
		ctx := context.Background()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
				runtime.Goexit()
				return nil, nil
			})
		}()
		<-done
		// More than three leases: only a runaway heartbeat can still hold it.
		time.Sleep(200 * time.Millisecond)
		res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil })
		require.NoError(t, err, "the key is still claimed after its owner's goroutine exited")
		assert.Equal(t, "ran", string(res.Value))
	})
}

// A value that decodes as an unused token (two bytes {1, 1}) in Do's key
// space makes Do loop, without WithWait, until ctx ends (forever with
// context.Background) instead of reporting a corrupt record.
func TestDoOnTokenRecordIsCorruptNotALoop(t *testing.T) {
	s := testkit.NewMem(t)
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	_, _, err = s.SetNX(context.Background(), idemkit.StoreKey(e, idemkit.ModeDo, "", "k"), []byte{1, 1}, time.Minute)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
}
