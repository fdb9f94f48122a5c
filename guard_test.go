package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuardAdmitsExactlyOneOfManyConcurrent(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithWindow(time.Minute))
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
			e := testkit.NewEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithRelease(tc.release))
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
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, idemkit.WithWindow(60*time.Millisecond))
		ctx := context.Background()
		require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { return nil }))
		require.ErrorIs(t, e.Guard(ctx, "k", func(context.Context) error { return nil }), idemkit.ErrDuplicate)
		time.Sleep(90 * time.Millisecond)
		require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { return nil }))
	})
}

func TestGuardReleaseOnPanic(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithRelease(idemkit.ReleaseOnError))
	ctx := context.Background()
	require.Panics(t, func() {
		_ = e.Guard(ctx, "k", func(context.Context) error { panic("boom") })
	})
	require.NoError(t, e.Guard(ctx, "k", func(context.Context) error { return nil }), "a panic released the key")
}

// TestGuardReleaseDeletesOnlyOwnClaim: a release after the window expired
// and another caller claimed the key must not delete the new claim.
func TestGuardReleaseDeletesOnlyOwnClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testkit.NewEngine(t, idemkit.WithWindow(40*time.Millisecond), idemkit.WithRelease(idemkit.ReleaseOnDone))
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
	})
}

// The same hole in Guard: with ReleaseOnError, a fn that ends with
// runtime.Goexit neither returns an error nor panics, and the claim is
// kept for the whole window.
func TestGuardGoexitInFnReleasesClaim(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithRelease(idemkit.ReleaseOnError))
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Guard(ctx, "g", func(context.Context) error {
			runtime.Goexit()
			return nil
		})
	}()
	<-done
	ran := false
	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { ran = true; return nil }),
		"the claim of a fn that did not complete is kept")
	assert.True(t, ran)
}
