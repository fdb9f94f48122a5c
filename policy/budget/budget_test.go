package budget_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// hangDetector bounds calls that must return at their budget; it is far
// above any budget used here and only catches a call that never returns.
const hangDetector = 5 * time.Second

// conformanceBudget is the budget of the Budgets the conformance suite
// runs through. The suite checks answers, not timing (the other tests here
// do): its largest cases move 16 MiB values, which under -race took over
// the default 1 s on a 2-core machine at a load average above 40, and
// failed as ErrUnavailable.
const conformanceBudget = 30 * time.Second

func TestBudgetConformance(t *testing.T) {
	t.Run("Detached", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			s := mustBudget(t, newMem(t), conformanceBudget)
			t.Cleanup(func() { _ = s.(store.Closer).Close() })
			return s
		})
	})
	t.Run("Inline", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			s := mustBudget(t, newMem(t), conformanceBudget, budget.WithInline())
			t.Cleanup(func() { _ = s.(store.Closer).Close() })
			return s
		})
	})
}

func TestBudgetCutsOffStoreThatIgnoresContext(t *testing.T) {
	f := newFaulty(t)
	f.Set(hanging) // blocks until the test ends, whatever its context says
	s := mustBudget(t, f, 50*time.Millisecond)
	start := time.Now()
	errs := everyOp(ctx, s)
	assert.Less(t, time.Since(start), hangDetector)
	for op, err := range errs {
		assert.ErrorIs(t, err, store.ErrUnavailable, op)
		assert.ErrorIs(t, err, context.DeadlineExceeded, op)
		assert.Contains(t, err.Error(), "50ms", op)
	}
	assert.EqualValues(t, 1, f.Calls.Load(), "later calls on the key wait behind the first, cut off and still running")
	_, err := s.Get(ctx, "other key")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualValues(t, 2, f.Calls.Load(), "a call on another key reaches the store")
}

var ctx = context.Background()

func TestBudgetInlineWithStoreThatHonoursContext(t *testing.T) {
	f := newFaulty(t)
	f.Set(stalling)
	s := mustBudget(t, f, 30*time.Millisecond, budget.WithInline())
	for op, err := range everyOp(ctx, s) {
		assert.ErrorIs(t, err, store.ErrUnavailable, op)
		assert.ErrorIs(t, err, context.DeadlineExceeded, op)
	}
}

func TestBudgetRejectsInvalidArguments(t *testing.T) {
	m := newMem(t)
	for name, c := range map[string]struct {
		s     store.Store
		d     time.Duration
		opts  []budget.Option
		names string
	}{
		"nil store":      {nil, time.Second, nil, "nil store"},
		"zero budget":    {m, 0, nil, "time budget 0s"},
		"negative":       {m, -time.Second, nil, "time budget -1s"},
		"max abandoned":  {m, time.Second, []budget.Option{budget.WithMaxAbandoned(0)}, "WithMaxAbandoned(0)"},
		"inline + bound": {m, time.Second, []budget.Option{budget.WithInline(), budget.WithMaxAbandoned(8)}, "WithInline"},
	} {
		s, err := budget.New(c.s, c.d, c.opts...)
		assert.ErrorIs(t, err, store.ErrInvalid, name)
		assert.ErrorContains(t, err, c.names, name)
		assert.Nil(t, s, name)
	}
}

func TestBudgetPassesThroughAnswers(t *testing.T) {
	f := newFaulty(t)
	s := mustBudget(t, f, time.Second)
	set, _, err := s.SetNX(ctx, "k", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	_, err = s.Get(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	_, _, err = s.SetNX(ctx, "", []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrInvalid)
	f.Set(failing)
	_, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, errInjected)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
}

func TestBudgetCallerCancellationStaysTheCallers(t *testing.T) {
	for _, inline := range []bool{false, true} {
		f := newFaulty(t)
		f.Set(stalling)
		var opts []budget.Option
		if inline {
			opts = append(opts, budget.WithInline())
		}
		s := mustBudget(t, f, time.Minute, opts...)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := s.Get(cctx, "k")
		assert.ErrorIs(t, err, context.Canceled, "inline=%v", inline)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "inline=%v", inline)
		assert.Less(t, time.Since(start), hangDetector)
	}
}

func TestBudgetCallerDeadlineBeforeBudget(t *testing.T) {
	f := newFaulty(t)
	f.Set(hanging)
	s := mustBudget(t, f, time.Minute)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := s.Get(dctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotContains(t, err.Error(), "time budget", "the caller's deadline is not reported as the budget's")
}

func TestBudgetDoneContextDoesNotCallStore(t *testing.T) {
	f := newFaulty(t)
	s := mustBudget(t, f, time.Second)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for op, err := range everyOp(cctx, s) {
		assert.ErrorIs(t, err, context.Canceled, op)
	}
	assert.Zero(t, f.Calls.Load())
}

func TestBudgetDetachedCallGetsItsOwnValue(t *testing.T) {
	r := &readingStore{bareStore: bareStore{newMem(t)}, release: make(chan struct{}), seen: make(chan []byte, 1)}
	s := mustBudget(t, r, 20*time.Millisecond)
	value := []byte("original")
	_, _, err := s.SetNX(ctx, "k", value, time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable)
	copy(value, "mutated!") // the abandoned call still runs: it must not see this
	close(r.release)
	require.Equal(t, []byte("original"), <-r.seen)
}

func TestBudgetExposesOptionalInterfacesOfItsStore(t *testing.T) {
	bare := mustBudget(t, bareStore{newMem(t)}, time.Second)
	_, isCloser := bare.(store.Closer)
	_, isPinger := bare.(store.Pinger)
	assert.False(t, isCloser)
	assert.False(t, isPinger)

	mem := newMem(t)
	closer := mustBudget(t, mem, time.Second)
	_, isPinger = closer.(store.Pinger)
	assert.False(t, isPinger)
	require.NoError(t, closer.(store.Closer).Close())
	_, err := mem.Get(ctx, "k")
	assert.ErrorIs(t, err, memstore.ErrClosed, "Close must close the wrapped store")

	c := &countingCloser{Faulty: newFaulty(t)}
	closeTwice := mustBudget(t, c, time.Second)
	require.NoError(t, closeTwice.(store.Closer).Close())
	require.NoError(t, closeTwice.(store.Closer).Close())
	assert.EqualValues(t, 1, c.Closes.Load(), "the wrapped store is closed once")

	f := newFaulty(t)
	both := mustBudget(t, f, 30*time.Millisecond)
	_, isCloser = both.(store.Closer)
	require.True(t, isCloser)
	p, isPinger := both.(store.Pinger)
	require.True(t, isPinger)
	require.NoError(t, p.Ping(ctx))
	f.Set(hanging)
	err = p.Ping(ctx)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// A Redis that accepts connections but never answers (a hung server, a
// black-holed proxy): go-redis with default options waits for its 5 s
// ReadTimeout whatever the context says; the budget answers at 50 ms.
func TestBudgetCutsOffSilentRedis(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	client := redis.NewClient(&redis.Options{Addr: l.Addr().String(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	rs, err := redisstore.New(client)
	require.NoError(t, err)

	s := mustBudget(t, rs, 50*time.Millisecond)
	start := time.Now()
	_, _, err = s.SetNX(ctx, "k", []byte("v"), time.Minute)
	assert.Less(t, time.Since(start), hangDetector)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// A store that hangs forever, ignoring its context, must not make a
// detached Budget pile up one goroutine per call: calls still running past
// their budget are bounded, and beyond the bound a call fails at once.
func TestBudgetBoundsAbandonedCalls(t *testing.T) {
	f := newFaulty(t)
	f.Set(hanging) // released by the test's cleanup
	s := mustBudget(t, f, time.Millisecond)
	const bound = budget.DefaultMaxAbandoned
	const calls = 2 * bound
	before := runtime.NumGoroutine()
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls / workers {
				_, err := s.Get(ctx, fmt.Sprint("k", w, i))
				assert.ErrorIs(t, err, store.ErrUnavailable)
			}
		})
	}
	wg.Wait()
	// At most bound abandoned calls, plus one per worker that started
	// before the others were counted as abandoned.
	leaked := runtime.NumGoroutine() - before
	assert.LessOrEqual(t, leaked, bound+workers, "goroutines left behind by %d calls to a hung store", calls)
	assert.LessOrEqual(t, f.Calls.Load(), int64(bound+workers), "calls handed to the hung store")
}

// Past the bound, calls fail at once without reaching the store; once the
// hung calls return, calls reach the store again.
func TestBudgetMaxAbandonedRecovers(t *testing.T) {
	h := &hungGet{bareStore: bareStore{newMem(t)}, release: make(chan struct{})}
	s := mustBudget(t, h, time.Millisecond, budget.WithMaxAbandoned(2))
	for i := range 2 {
		_, err := s.Get(ctx, fmt.Sprint("k", i))
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	_, err := s.Get(ctx, "k2")
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "still running")
	assert.LessOrEqual(t, h.calls.Load(), int64(2), "the third call never reached the store")

	close(h.release)
	require.Eventually(t, func() bool {
		_, err := s.Get(ctx, "k")
		return errors.Is(err, store.ErrNotFound)
	}, hangDetector, time.Millisecond)
}

// lateClaim is a store whose SetNX blocks, ignoring its context, until
// released, and then applies; a CompareAndDelete that reaches it while a
// SetNX is still blocked records that it overtook the claim.
type lateClaim struct {
	bareStore
	release   chan struct{}
	blocked   atomic.Bool
	overtaken atomic.Bool
}

func (l *lateClaim) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	l.blocked.Store(true)
	<-l.release
	defer l.blocked.Store(false)
	// The request was sent before the budget ran out: it applies.
	return l.bareStore.SetNX(context.WithoutCancel(ctx), key, value, ttl)
}

func (l *lateClaim) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if l.blocked.Load() {
		l.overtaken.Store(true)
	}
	return l.bareStore.CompareAndDelete(ctx, key, old)
}

// A claim cut off at the budget may still land; the engine then undoes it
// with a CompareAndDelete. The undo must not overtake the claim still on
// its way, or the claim lands after it and stays (an orphan that answers
// "in progress" until its lease ends): a call on a key waits, within its
// own budget, for a cut-off call on that key to return.
func TestBudgetCallWaitsForACutOffCallOnItsKey(t *testing.T) {
	l := &lateClaim{bareStore: bareStore{newMem(t)}, release: make(chan struct{})}
	s := mustBudget(t, l, 300*time.Millisecond)
	_, _, err := s.SetNX(ctx, "k", []byte("claim"), time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, l.blocked.Load(), "the cut-off claim is still on its way")

	time.AfterFunc(10*time.Millisecond, func() { close(l.release) }) // the claim lands later
	ok, err := s.CompareAndDelete(ctx, "k", []byte("claim"))
	assert.False(t, l.overtaken.Load(), "the undo reached the store before the claim it undoes")
	if err == nil { // the claim landed within the undo's budget
		assert.True(t, ok, "the undo deleted the claim")
		_, err = l.bareStore.Get(ctx, "k")
		assert.ErrorIs(t, err, store.ErrNotFound, "no orphan claim")
	} else {
		assert.ErrorIs(t, err, store.ErrUnavailable)
	}
	_, err = s.Get(ctx, "other")
	assert.ErrorIs(t, err, store.ErrNotFound, "other keys do not wait")
}

// perValueClaim is a store whose SetNX blocks, ignoring its context, until
// the release channel of its value is closed, and then applies; a
// CompareAndDelete that reaches it while a SetNX of the value it deletes
// is still blocked records that it overtook that claim.
type perValueClaim struct {
	bareStore
	mu        sync.Mutex
	release   map[string]chan struct{}
	blocked   map[string]bool
	overtaken atomic.Bool
}

func (p *perValueClaim) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	p.mu.Lock()
	ch := p.release[string(value)]
	p.blocked[string(value)] = true
	p.mu.Unlock()
	<-ch
	defer func() {
		p.mu.Lock()
		p.blocked[string(value)] = false
		p.mu.Unlock()
	}()
	return p.bareStore.SetNX(context.WithoutCancel(ctx), key, value, ttl)
}

func (p *perValueClaim) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	p.mu.Lock()
	if p.blocked[string(old)] {
		p.overtaken.Store(true)
	}
	p.mu.Unlock()
	return p.bareStore.CompareAndDelete(ctx, key, old)
}

func (p *perValueClaim) isBlocked(value string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked[value]
}

// Two concurrent claims of one key (a duplicate request) are both cut off.
// The later one lands first; the undo of the earlier one must still wait
// for the earlier claim, which is still on its way, not only for the
// latest cut-off call on the key.
func TestBudgetCallWaitsForEveryCutOffCallOnItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &perValueClaim{
			bareStore: bareStore{newMem(t)},
			release:   map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})},
			blocked:   map[string]bool{},
		}
		t.Cleanup(func() {
			for _, ch := range p.release {
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
		})
		const budget = 200 * time.Millisecond
		s := mustBudget(t, p, budget)
		errs := make(chan error, 2)
		go func() {
			_, _, err := s.SetNX(ctx, "k", []byte("a"), time.Minute)
			errs <- err
		}()
		require.Eventually(t, func() bool { return p.isBlocked("a") }, hangDetector, time.Millisecond)
		time.Sleep(budget / 4) // "b" is cut off after "a"
		go func() {
			_, _, err := s.SetNX(ctx, "k", []byte("b"), time.Minute)
			errs <- err
		}()
		for range 2 {
			require.ErrorIs(t, <-errs, context.DeadlineExceeded)
		}
		close(p.release["b"]) // the later claim lands; the earlier is still on its way
		require.Eventually(t, func() bool { return !p.isBlocked("b") }, hangDetector, time.Millisecond)
		synctest.Wait() // the landed call's bookkeeping is done

		time.AfterFunc(budget/4, func() { close(p.release["a"]) }) // the earlier claim lands later
		_, err := s.CompareAndDelete(ctx, "k", []byte("a"))
		assert.False(t, p.overtaken.Load(), "the undo of the earlier claim reached the store before that claim")
		if err != nil {
			assert.ErrorIs(t, err, store.ErrUnavailable)
		}
	})
}
