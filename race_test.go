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
)

// TestDoWaitersOnRealStoresRunOnceAfterFailures sends one key from many
// WithWait callers over memstore and a bbolt file, with work longer than
// the lease (heartbeats must hold it) that fails transiently twice: each
// failure releases the key to exactly one waiter, and the third run's
// result is replayed to every other caller.
func TestDoWaitersOnRealStoresRunOnceAfterFailures(t *testing.T) {
	for name, open := range oversizedStores() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, err := idemkit.New(open(t), idemkit.WithObserver(nil), idemkit.WithLease(150*time.Millisecond))
				require.NoError(t, err)
				ctx := context.Background()
				var runs, fails atomic.Int32
				fn := func(context.Context) ([]byte, error) {
					n := runs.Add(1)
					time.Sleep(200 * time.Millisecond) // beyond the lease: heartbeats must hold it
					if n <= 2 {
						fails.Add(1)
						return nil, errors.New("transient")
					}
					return []byte("ok"), nil
				}
				var wg sync.WaitGroup
				var okN, replayed atomic.Int32
				for range 24 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := e.Do(ctx, "k", "fp", fn, idemkit.WithWait(time.Millisecond))
						if err == nil {
							okN.Add(1)
							if res.Replayed {
								replayed.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				require.EqualValues(t, 3, runs.Load())
				require.EqualValues(t, 22, okN.Load())
				require.EqualValues(t, 21, replayed.Load())
			})
		})
	}
}

// TestConcurrentEndsOfOneClaimOnRealStores ends each claim with Complete,
// Fail and Release from several goroutines at once while its heartbeat
// beats, over memstore and a bbolt file: exactly one event with a Duration
// per admitted claim, and no race with the beat under way.
func TestConcurrentEndsOfOneClaimOnRealStores(t *testing.T) {
	for name, open := range oversizedStores() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var timed, admitted atomic.Int32
				obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
					if ev.Duration > 0 {
						timed.Add(1)
					}
					if ev.Kind == idemkit.EventAdmitted {
						admitted.Add(1)
					}
				})
				e, err := idemkit.New(open(t), idemkit.WithObserver(obs), idemkit.WithLease(6*time.Millisecond), idemkit.WithHeartbeat(time.Millisecond))
				require.NoError(t, err)
				ctx := context.Background()
				for i := range 30 {
					c, _, err := e.Begin(ctx, "k", "")
					require.NoError(t, err)
					require.NotNil(t, c)
					time.Sleep(3 * time.Millisecond)
					var wg sync.WaitGroup
					for g := range 6 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							switch (g + i) % 3 {
							case 0:
								_ = c.Complete(ctx, []byte("v"))
							case 1:
								_ = c.Fail(ctx, errors.New("x"))
							default:
								c.Release(ctx)
							}
						}()
					}
					wg.Wait()
					_, _ = e.Forget(ctx, idemkit.ModeDo, "k")
				}
				require.Equal(t, admitted.Load(), timed.Load())
			})
		})
	}
}
