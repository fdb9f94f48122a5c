package policy_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

func TestTieredConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		p, f := memstore.New(), memstore.New()
		s := policy.NewTiered(p, f)
		t.Cleanup(func() {
			_ = s.Close()
			_ = p.Close()
			_ = f.Close()
		})
		return s
	})
}

// Conformance while the primary is down: the fallback answers everything.
func TestTieredConformanceDuringOutage(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		p := newFaulty(t)
		p.set(failing)
		s := policy.NewTiered(p, memstore.New(), policy.WithFailureThreshold(1), policy.WithCoolDown(time.Hour))
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// tierLog records TierEvents.
type tierLog struct {
	mu     sync.Mutex
	events []policy.TierEvent
}

func (l *tierLog) observe(ev policy.TierEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *tierLog) kinds() []policy.TierEventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []policy.TierEventKind
	for _, ev := range l.events {
		out = append(out, ev.Kind)
	}
	return out
}

func (l *tierLog) keysOf(kind policy.TierEventKind) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.events {
		if ev.Kind == kind {
			out = append(out, ev.Key)
		}
	}
	return out
}

// newTiered returns a Tiered over a faulty primary and a counting fallback.
func newTiered(t *testing.T, opts ...policy.TieredOption) (*policy.Tiered, *faultyStore, *faultyStore, *tierLog) {
	p, f := newFaulty(t), newFaulty(t)
	log := &tierLog{}
	s := policy.NewTiered(p, f, append([]policy.TieredOption{policy.WithTierObserver(log.observe)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	return s, p, f, log
}

func TestTieredFallbackUntouchedWhileClosed(t *testing.T) {
	s, p, f, _ := newTiered(t)
	for op, err := range everyOp(ctx, s) {
		if op != "Consume" { // CompareAndDelete removed the key
			require.NoError(t, err, op)
		}
	}
	_, err := s.Get(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.EqualValues(t, 6, p.calls.Load())
	assert.Zero(t, f.calls.Load())
	assert.Zero(t, s.Stats().FallbackOps)
}

func TestTieredOtherErrorsAreNotFailures(t *testing.T) {
	s, _, f, _ := newTiered(t, policy.WithFailureThreshold(1))
	for range 5 {
		_, err := s.Get(ctx, "absent")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, _, err = s.SetNX(ctx, "", []byte("v"), time.Minute)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = s.Consume(ctx, "absent")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	assert.Equal(t, policy.BreakerClosed, s.State())
	assert.Zero(t, f.calls.Load())
}

func TestTieredCallerCancellationIsNotAFailure(t *testing.T) {
	s, p, f, _ := newTiered(t, policy.WithFailureThreshold(1))
	p.set(stalling)
	for range 3 {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(5*time.Millisecond, cancel)
		_, err := s.Get(cctx, "k")
		require.ErrorIs(t, err, context.Canceled)
	}
	assert.Equal(t, policy.BreakerClosed, s.State())
	assert.Zero(t, f.calls.Load(), "a caller that gave up gets no fallback answer")
}

func TestTieredRetriesOnFallbackBeforeTheBreakerOpens(t *testing.T) {
	s, p, _, _ := newTiered(t, policy.WithFailureThreshold(3))
	p.set(failing)
	set, _, err := s.SetNX(ctx, "k", []byte("v"), time.Minute)
	require.NoError(t, err, "the fallback answers at once")
	require.True(t, set)
	st := s.Stats()
	assert.Equal(t, policy.BreakerClosed, st.State)
	assert.EqualValues(t, 1, st.Retried)
	assert.EqualValues(t, 1, st.FallbackOps)
	assert.Equal(t, 1, st.Journal)
}

func TestTieredBreakerOpensProbesAndCloses(t *testing.T) {
	s, p, f, log := newTiered(t, policy.WithFailureThreshold(3), policy.WithCoolDown(50*time.Millisecond))
	p.set(failing)
	for i := range 3 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound, "answered by the fallback")
		want := policy.BreakerClosed
		if i == 2 {
			want = policy.BreakerOpen
		}
		require.Equal(t, want, s.State(), "after %d failures", i+1)
	}
	assert.EqualValues(t, 3, p.calls.Load())

	// Open: the primary is not called.
	for range 10 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	assert.EqualValues(t, 3, p.calls.Load())
	assert.EqualValues(t, 13, f.calls.Load())

	// After the cool-down a probe goes to the primary; it still fails.
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "k")
		return p.calls.Load() == 4
	}, hangDetector, 5*time.Millisecond)
	assert.Equal(t, policy.BreakerOpen, s.State(), "a failed probe opens again")

	// The primary answers: the next probe closes the breaker.
	p.set(healthy)
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "k")
		return s.State() == policy.BreakerClosed
	}, hangDetector, 5*time.Millisecond)
	before := f.calls.Load()
	for range 10 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	assert.Equal(t, before, f.calls.Load(), "closed: the fallback is off the path")
	assert.Equal(t, []policy.TierEventKind{
		policy.TierOpen, policy.TierHalfOpen, policy.TierOpen, policy.TierHalfOpen, policy.TierClosed,
	}, log.kinds())
}

// openBreaker fails the primary until the breaker opens.
func openBreaker(t *testing.T, s *policy.Tiered, p *faultyStore) {
	t.Helper()
	p.set(failing)
	for s.State() != policy.BreakerOpen {
		_, err := s.Get(ctx, "probe")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
}

// recoverPrimary heals the primary and sends operations until the breaker
// closes.
func recoverPrimary(t *testing.T, s *policy.Tiered, p *faultyStore) {
	t.Helper()
	p.set(healthy)
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.State() == policy.BreakerClosed
	}, hangDetector, 5*time.Millisecond)
}

func TestTieredCopyForward(t *testing.T) {
	s, p, f, log := newTiered(t, policy.WithFailureThreshold(1), policy.WithCoolDown(20*time.Millisecond))
	openBreaker(t, s, p)

	claim := func(key, value string, ttl time.Duration) {
		set, _, err := s.SetNX(ctx, key, []byte(value), ttl)
		require.NoError(t, err)
		require.True(t, set, key)
	}
	claim("live", "mine", time.Minute)
	claim("short", "mine", 30*time.Millisecond)
	claim("contested", "mine", time.Minute)
	claim("swapped", "old", time.Minute)
	ok, err := s.CompareAndSwap(ctx, "swapped", []byte("old"), []byte("new"), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	claim("released", "mine", time.Minute)
	ok, err = s.CompareAndDelete(ctx, "released", []byte("mine"))
	require.NoError(t, err)
	require.True(t, ok)
	// Meanwhile another instance claims "contested" in the primary.
	set, _, err := p.Store.SetNX(ctx, "contested", []byte("theirs"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	time.Sleep(50 * time.Millisecond) // "short" expires

	recoverPrimary(t, s, p)
	require.Eventually(t, func() bool { return s.Stats().Journal == 0 }, hangDetector, 5*time.Millisecond)

	st := s.Stats()
	assert.EqualValues(t, 2, st.Copied, "live and swapped")
	assert.EqualValues(t, 1, st.Conflicts)
	assert.EqualValues(t, 2, st.Skipped, "short expired, released deleted")
	assert.Zero(t, st.CopyFailed)
	assert.ElementsMatch(t, []string{"live", "swapped"}, log.keysOf(policy.TierCopied))
	assert.Equal(t, []string{"contested"}, log.keysOf(policy.TierConflict))

	e, err := p.Store.Get(ctx, "live")
	require.NoError(t, err)
	assert.Equal(t, []byte("mine"), e.Value)
	assert.LessOrEqual(t, e.TTL, time.Minute, "the remaining TTL, never more")
	e, err = p.Store.Get(ctx, "swapped")
	require.NoError(t, err)
	assert.Equal(t, []byte("new"), e.Value)
	e, err = p.Store.Get(ctx, "contested")
	require.NoError(t, err)
	assert.Equal(t, []byte("theirs"), e.Value, "the primary's claim wins")
	for _, k := range []string{"short", "released"} {
		_, err = p.Store.Get(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, k)
	}
	for _, k := range []string{"live", "swapped", "contested"} {
		_, err = f.Store.Get(ctx, k)
		assert.ErrorIs(t, err, store.ErrNotFound, "%s is gone from the fallback", k)
	}
}

// An operation on a journaled key copies it forward before the primary
// sees it, even with no background copier (stopped by Close here).
func TestTieredOperationOnJournaledKeyCopiesItFirst(t *testing.T) {
	s, p, _, _ := newTiered(t, policy.WithFailureThreshold(1), policy.WithCoolDown(20*time.Millisecond))
	require.NoError(t, s.Close())
	openBreaker(t, s, p)
	set, _, err := s.SetNX(ctx, "k", []byte("first"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)

	recoverPrimary(t, s, p)
	require.Equal(t, 1, s.Stats().Journal, "no background copier after Close")
	set, e, err := s.SetNX(ctx, "k", []byte("second"), time.Minute)
	require.NoError(t, err)
	assert.False(t, set, "the outage claim still holds")
	assert.Equal(t, []byte("first"), e.Value)
	assert.Zero(t, s.Stats().Journal)
	assert.EqualValues(t, 1, s.Stats().Copied)
}

func TestTieredOneWinnerDuringOutage(t *testing.T) {
	s, p, _, _ := newTiered(t, policy.WithFailureThreshold(1), policy.WithCoolDown(time.Hour))
	openBreaker(t, s, p)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			set, _, err := s.SetNX(ctx, "k", fmt.Appendf(nil, "v%d", i), time.Minute)
			assert.NoError(t, err)
			if set {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, wins.Load())
}

// Many goroutines at one key while the primary fails and recovers: every
// call gets an answer, and the breaker ends closed with nothing left to
// copy.
func TestTieredConcurrentFailureAndRecovery(t *testing.T) {
	s, p, _, _ := newTiered(t, policy.WithFailureThreshold(2), policy.WithCoolDown(5*time.Millisecond))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%d-%d", i, n%16)
				_, _, err := s.SetNX(ctx, key, []byte("v"), 50*time.Millisecond)
				assert.NoError(t, err)
				_, err = s.Get(ctx, key)
				assert.True(t, err == nil || errorsIs(err, store.ErrNotFound), "%v", err)
			}
		})
	}
	for range 5 {
		p.set(failing)
		time.Sleep(20 * time.Millisecond)
		p.set(healthy)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	recoverPrimary(t, s, p)
	require.Eventually(t, func() bool { return s.Stats().Journal == 0 }, hangDetector, 5*time.Millisecond)
	st := s.Stats()
	assert.NotZero(t, st.FallbackOps)
	t.Logf("stats: %+v", st)
}

func TestTieredJournalFull(t *testing.T) {
	s, p, _, log := newTiered(t, policy.WithFailureThreshold(1), policy.WithJournalSize(2), policy.WithCoolDown(time.Hour))
	openBreaker(t, s, p)
	for i := range 3 {
		set, _, err := s.SetNX(ctx, fmt.Sprintf("k%d", i), []byte("v"), time.Minute)
		require.NoError(t, err)
		require.True(t, set)
	}
	st := s.Stats()
	assert.Equal(t, 2, st.Journal)
	assert.EqualValues(t, 1, st.JournalDropped)
	assert.Equal(t, []string{"k2"}, log.keysOf(policy.TierJournalFull))
}

func TestTieredPing(t *testing.T) {
	s, p, f, _ := newTiered(t)
	require.NoError(t, s.Ping(ctx))
	p.set(failing)
	require.NoError(t, s.Ping(ctx), "the fallback still serves")
	f.set(failing)
	require.ErrorIs(t, s.Ping(ctx), store.ErrUnavailable)
}

func TestTieredCloseLeavesTiersOpen(t *testing.T) {
	p, f := memstore.New(), memstore.New()
	s := policy.NewTiered(p, f)
	require.NoError(t, s.Close())
	_, _, err := p.SetNX(ctx, "k", []byte("v"), time.Minute)
	require.NoError(t, err)
	_, _, err = f.SetNX(ctx, "k", []byte("v"), time.Minute)
	require.NoError(t, err)
	assert.Panics(t, func() { policy.NewTiered(nil, f) })
}
