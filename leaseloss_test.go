package idemkit_test

import (
	"context"
	"errors"
	"math/rand/v2"
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

// Lease loss stops the work: when a heartbeat finds the lease lost, or
// cannot confirm it before it ends, fn's context is cancelled with cause
// ErrLeaseLost, one EventLeaseLost is reported, and Do returns
// ErrLeaseLost without recording anything.

// beatsLost reports every lease extension (a swap of a record for
// itself, what a heartbeat does) as not applied once lost is set, as a
// store does once another caller has taken the key over.
type beatsLost struct {
	store.Store
	lost atomic.Bool
}

func (s *beatsLost) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if s.lost.Load() && idemkit.IsBeat(old, nw) {
		return false, nil
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

// paused is a store that, while down, fails every call (block unset) or
// holds every call until it is up again (block set), as a store does
// behind a network partition or while its process is stopped.
type paused struct {
	store.Store
	block bool
	mu    sync.Mutex
	down  bool
	up    chan struct{} // closed when the store comes back; made in the bubble
	calls atomic.Int32  // calls made while down
}

func newPaused(s store.Store, block bool) *paused {
	return &paused{Store: s, block: block, up: make(chan struct{})}
}

func (p *paused) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
}

func (p *paused) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		p.down = false
		close(p.up)
		p.up = make(chan struct{})
	}
}

// gate fails or holds a call made while the store is down.
func (p *paused) gate(op string) error {
	p.mu.Lock()
	down, up := p.down, p.up
	p.mu.Unlock()
	if !down {
		return nil
	}
	p.calls.Add(1)
	if !p.block {
		return store.Unavailable(op, errors.New("store paused"))
	}
	<-up
	return nil
}

func (p *paused) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := p.gate("setnx"); err != nil {
		return false, store.Entry{}, err
	}
	return p.Store.SetNX(ctx, k, v, ttl)
}

func (p *paused) Get(ctx context.Context, k string) (store.Entry, error) {
	if err := p.gate("get"); err != nil {
		return store.Entry{}, err
	}
	return p.Store.Get(ctx, k)
}

func (p *paused) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if err := p.gate("cas"); err != nil {
		return false, err
	}
	return p.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func (p *paused) CompareAndDelete(ctx context.Context, k string, old []byte) (bool, error) {
	if err := p.gate("cad"); err != nil {
		return false, err
	}
	return p.Store.CompareAndDelete(ctx, k, old)
}

// timedEvents counts the events that carry a Duration: exactly one per
// admitted claim.
func timedEvents(rec *testkit.Recorder) int {
	n := 0
	for _, ev := range rec.Events() {
		if ev.Duration > 0 {
			n++
		}
	}
	return n
}

func TestDoLeaseLostByBeatCancelsFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &beatsLost{Store: testkit.NewMem(t)}
		rec := &testkit.Recorder{}
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(300*time.Millisecond), idemkit.WithHeartbeat(100*time.Millisecond), idemkit.WithObserver(rec))
		start := time.Now()
		var cause error
		var after time.Duration
		res, err := e.Do(context.Background(), "k", "", func(ctx context.Context) ([]byte, error) {
			s.lost.Store(true)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Error("fn's context was not cancelled when the lease was lost")
			}
			after = time.Since(start)
			cause = context.Cause(ctx)
			return []byte("partial"), ctx.Err()
		})
		require.ErrorIs(t, cause, idemkit.ErrLeaseLost, "context.Cause names the lost lease")
		assert.Equal(t, 100*time.Millisecond, after, "cancelled by the first beat that found the lease lost")
		require.ErrorIs(t, err, idemkit.ErrLeaseLost)
		assert.NotErrorIs(t, err, context.Canceled, "the adapters must read a lost lease, not a cancelled request")
		assert.Equal(t, "partial", string(res.Value), "fn's value comes back, unrecorded, as for any lost lease")
		assert.Equal(t, 1, rec.Count(idemkit.EventLeaseLost), "one event per claim, not per beat")
		assert.Equal(t, 1, timedEvents(rec), "the claim ended once")
		assert.Zero(t, rec.Count(idemkit.EventCompleted))
	})
}

// TestTypedDoLeaseLostCancelsFn: the typed Do gives fn the same context.
func TestTypedDoLeaseLostCancelsFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &beatsLost{Store: testkit.NewMem(t)}
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(300*time.Millisecond))
		_, _, err := idemkit.Do(context.Background(), e, "k", "", func(ctx context.Context) (int, error) {
			s.lost.Store(true)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Error("fn's context was not cancelled when the lease was lost")
			}
			return 0, context.Cause(ctx)
		})
		require.ErrorIs(t, err, idemkit.ErrLeaseLost)
	})
}

// TestDoPausedStoreCancelsFnBeforeTakeover: the first owner's store calls
// fail (a partition: another instance still reaches the store). Its beats
// cannot confirm the lease, so fn is cancelled when the lease ends, no
// later, and before a second owner, who takes the key once the lease has
// ended in the store, completes its work. Both a store that fails fast and
// one that holds every call (a stopped server) are covered: a beat hanging
// in the store must not delay the cancellation.
func TestDoPausedStoreCancelsFnBeforeTakeover(t *testing.T) {
	for _, block := range []bool{false, true} {
		name := map[bool]string{false: "failing", true: "hanging"}[block]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const lease = 300 * time.Millisecond
				mem := testkit.NewMem(t)
				p := newPaused(mem, block)
				rec := &testkit.Recorder{}
				e1 := testkit.NewEngineOn(t, p, idemkit.WithLease(lease), idemkit.WithHeartbeat(100*time.Millisecond), idemkit.WithObserver(rec))
				e2 := testkit.NewEngineOn(t, mem, idemkit.WithLease(lease))
				ctx := context.Background()
				start := time.Now()

				var mu sync.Mutex
				var order []string
				note := func(s string) {
					mu.Lock()
					defer mu.Unlock()
					order = append(order, s)
				}
				var cancelledAt time.Duration
				var err1 error
				done1 := make(chan struct{})
				go func() {
					defer close(done1)
					_, err1 = e1.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
						time.Sleep(50 * time.Millisecond)
						p.pause()
						select {
						case <-ctx.Done():
							cancelledAt = time.Since(start)
							note("fn1 cancelled")
						case <-time.After(10 * time.Second):
							note("fn1 finished uncancelled")
						}
						return nil, context.Cause(ctx)
					})
				}()

				time.Sleep(lease / 2)
				var res2 idemkit.Result
				for {
					var err error
					res2, err = e2.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
						note("fn2 completed")
						return []byte("second"), nil
					})
					if err == nil {
						break
					}
					require.ErrorIs(t, err, idemkit.ErrInProgress)
					time.Sleep(7 * time.Millisecond)
				}
				assert.Equal(t, "second", string(res2.Value))

				if block {
					p.resume() // let the hanging beat return, so Do can
				}
				<-done1
				assert.Equal(t, []string{"fn1 cancelled", "fn2 completed"}, order)
				assert.LessOrEqual(t, cancelledAt, lease, "cancelled no later than the lease's end")
				require.ErrorIs(t, err1, idemkit.ErrLeaseLost)
				assert.Equal(t, 1, rec.Count(idemkit.EventLeaseLost))
				assert.Equal(t, 1, timedEvents(rec))
				assert.Positive(t, p.calls.Load(), "the beats tried the store")
			})
		})
	}
}

// TestDoNoCancellationWhileBeatsConfirm: fn runs over several leases while
// the beats confirm the lease, one beat in two failing: a failed beat is
// retried before the lease ends, and fn's context stays live.
func TestDoNoCancellationWhileBeatsConfirm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &everyOther{Store: testkit.NewMem(t)}
		rec := &testkit.Recorder{}
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(300*time.Millisecond), idemkit.WithObserver(rec))
		res, err := e.Do(context.Background(), "k", "", func(ctx context.Context) ([]byte, error) {
			s.on.Store(true)
			select {
			case <-ctx.Done():
				t.Errorf("fn's context was cancelled: %v", context.Cause(ctx))
			case <-time.After(2 * time.Second): // over six leases
			}
			s.on.Store(false)
			return []byte("v"), nil
		})
		require.NoError(t, err)
		assert.Equal(t, "v", string(res.Value))
		assert.Greater(t, s.failed.Load(), int32(2), "beats failed and were retried")
		assert.Zero(t, rec.Count(idemkit.EventLeaseLost))
		assert.Equal(t, 1, rec.Count(idemkit.EventCompleted))
	})
}

// everyOther fails every other lease extension while on.
type everyOther struct {
	store.Store
	on     atomic.Bool
	n      atomic.Int32
	failed atomic.Int32
}

func (s *everyOther) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if s.on.Load() && idemkit.IsBeat(old, nw) && s.n.Add(1)%2 == 1 {
		s.failed.Add(1)
		return false, store.Unavailable("cas", errors.New("flaky"))
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

// slowFlaky delays every call (the request's way to the store: the store acts
// after the delay) and fails some of them.
type slowFlaky struct {
	store.Store
	mu  sync.Mutex
	rnd *rand.Rand
}

func (f *slowFlaky) trip(op string) error {
	f.mu.Lock()
	d := time.Duration(1+f.rnd.IntN(20)) * time.Millisecond
	fail := f.rnd.IntN(4) == 0
	f.mu.Unlock()
	time.Sleep(d)
	if fail {
		return store.Unavailable(op, errors.New("flaky"))
	}
	return nil
}

func (f *slowFlaky) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := f.trip("setnx"); err != nil {
		return false, store.Entry{}, err
	}
	return f.Store.SetNX(ctx, k, v, ttl)
}

func (f *slowFlaky) Get(ctx context.Context, k string) (store.Entry, error) {
	if err := f.trip("get"); err != nil {
		return store.Entry{}, err
	}
	return f.Store.Get(ctx, k)
}

func (f *slowFlaky) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if err := f.trip("cas"); err != nil {
		return false, err
	}
	return f.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func (f *slowFlaky) CompareAndDelete(ctx context.Context, k string, old []byte) (bool, error) {
	if err := f.trip("cad"); err != nil {
		return false, err
	}
	return f.Store.CompareAndDelete(ctx, k, old)
}

// TestDoLeaseLossRaceOneUncancelledOwner: many callers at one key with a
// short lease over a slow, slowFlaky store, each fn working for up to three
// leases. Once an fn has started, no other fn may still be running with a
// live context: a lease that was lost, or could not be confirmed, has
// stopped its work first. (An fn may start at the very instant the lease
// before it ends, when that lease's fn is being cancelled; so the check
// comes a microsecond after the start.)
func TestDoLeaseLossRaceOneUncancelledOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 90 * time.Millisecond
		s := &slowFlaky{Store: testkit.NewMem(t), rnd: rand.New(rand.NewPCG(1, 2))}
		rec := &testkit.Recorder{}
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(lease), idemkit.WithObserver(rec))
		var live, overlaps, runs, cancelled atomic.Int32
		errWork := errors.New("work failed; run again")
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(g), 7))
				end := time.Now().Add(20 * time.Second)
				for time.Now().Before(end) {
					work := time.Duration(1 + rnd.IntN(int(3*lease)))
					_, _ = e.Do(context.Background(), "k", "", func(ctx context.Context) ([]byte, error) {
						runs.Add(1)
						live.Add(1)
						time.Sleep(time.Microsecond)
						if live.Load() > 1 {
							overlaps.Add(1)
						}
						select {
						case <-ctx.Done():
							live.Add(-1)
							cancelled.Add(1)
							if !errors.Is(context.Cause(ctx), idemkit.ErrLeaseLost) {
								t.Errorf("cause %v", context.Cause(ctx))
							}
							return nil, context.Cause(ctx)
						case <-time.After(work):
							live.Add(-1)
						}
						return nil, errWork
					})
					time.Sleep(time.Duration(1+rnd.IntN(10)) * time.Millisecond)
				}
			})
		}
		wg.Wait()
		t.Logf("runs %d, cancelled %d, lease_lost events %d", runs.Load(), cancelled.Load(), rec.Count(idemkit.EventLeaseLost))
		assert.Zero(t, overlaps.Load(), "an fn started while another ran uncancelled")
		assert.Positive(t, cancelled.Load(), "the slowFlaky store made leases lost")
		assert.Equal(t, rec.Count(idemkit.EventAdmitted), timedEvents(rec), "each claim ended with exactly one timed event")
	})
}
