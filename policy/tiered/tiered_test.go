package tiered_test

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
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

func TestTieredConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		p, f := newMem(t), newMem(t)
		s := mustTiered(t, p, f)
		t.Cleanup(func() {
			_ = s.Close()
			_ = p.Close()
			_ = f.Close()
		})
		return s.Store
	})
}

// While the breaker is open the fallback answers for the keys it received;
// for a key it never received, "absent" is not an answer (the primary may
// hold the key): Get, CompareAndSwap and Consume return ErrUnavailable.
func TestTieredDuringOutageUnknownKeysAreUnavailable(t *testing.T) {
	s, p, _, _ := newTiered(t, tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Hour))
	openBreaker(t, s, p)
	v := []byte("v")
	_, err := s.Get(ctx, "unknown")
	assert.ErrorIs(t, err, store.ErrUnavailable, "Get")
	ok, err := s.CompareAndSwap(ctx, "unknown", v, v, time.Minute)
	assert.ErrorIs(t, err, store.ErrUnavailable, "CompareAndSwap")
	assert.False(t, ok)
	_, err = s.Consume(ctx, "unknown")
	assert.ErrorIs(t, err, store.ErrUnavailable, "Consume")

	// A key written during the outage: the fallback's answers are answers.
	set, _, err := s.SetNX(ctx, "known", v, time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	set, e, err := s.SetNX(ctx, "known", []byte("w"), time.Minute)
	require.NoError(t, err)
	assert.False(t, set)
	assert.Equal(t, v, e.Value)
	ok, err = s.CompareAndSwap(ctx, "known", []byte("w"), v, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a mismatch on a known key is a plain false")
	ok, err = s.CompareAndSwap(ctx, "known", v, []byte("w"), time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	got, err := s.Consume(ctx, "known")
	require.NoError(t, err)
	assert.Equal(t, []byte("w"), got)
	_, err = s.Consume(ctx, "known")
	assert.ErrorIs(t, err, store.ErrNotFound, "consumed during the outage: absent")
	_, err = s.Get(ctx, "known")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// tierLog records TierEvents.
type tierLog struct {
	mu     sync.Mutex
	events []tiered.Event
}

func (l *tierLog) observe(ev tiered.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *tierLog) kinds() []tiered.EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tiered.EventKind
	for _, ev := range l.events {
		out = append(out, ev.Kind)
	}
	return out
}

func (l *tierLog) keysOf(kind tiered.EventKind) []string {
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
func newTiered(t *testing.T, opts ...tiered.Option) (tieredStore, *faultyStore, *faultyStore, *tierLog) {
	p, f := newFaulty(t), newFaulty(t)
	log := &tierLog{}
	s := mustTiered(t, p, f, append([]tiered.Option{tiered.WithObserver(log.observe)}, opts...)...)
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
	assert.EqualValues(t, 6, p.Calls.Load())
	assert.Zero(t, f.Calls.Load())
	assert.Zero(t, s.Stats().FallbackOps)
}

func TestTieredOtherErrorsAreNotFailures(t *testing.T) {
	s, _, f, _ := newTiered(t, tiered.WithFailureThreshold(1))
	for range 5 {
		_, err := s.Get(ctx, "absent")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, _, err = s.SetNX(ctx, "", []byte("v"), time.Minute)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = s.Consume(ctx, "absent")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	assert.Equal(t, tiered.BreakerClosed, s.State())
	assert.Zero(t, f.Calls.Load())
}

func TestTieredCallerCancellationIsNotAFailure(t *testing.T) {
	s, p, f, _ := newTiered(t, tiered.WithFailureThreshold(1))
	p.Set(stalling)
	for range 3 {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(5*time.Millisecond, cancel)
		_, err := s.Get(cctx, "k")
		require.ErrorIs(t, err, context.Canceled)
	}
	assert.Equal(t, tiered.BreakerClosed, s.State())
	assert.Zero(t, f.Calls.Load(), "a caller that gave up gets no fallback answer")
}

// A primary failure while the breaker is closed is returned as it is: the
// write may have happened in the primary, so it is not applied to the
// fallback as well.
func TestTieredPrimaryFailureIsReturnedWhileTheBreakerIsClosed(t *testing.T) {
	s, p, f, _ := newTiered(t, tiered.WithFailureThreshold(3))
	p.Set(failing)
	for op, err := range everyOp(ctx, s) {
		assert.ErrorIs(t, err, store.ErrUnavailable, op)
	}
	st := s.Stats()
	assert.Equal(t, tiered.BreakerOpen, st.State, "the third failure opened it")
	assert.EqualValues(t, 3, st.PrimaryFailed, "SetNX, Get and CompareAndSwap reached the primary")
	assert.EqualValues(t, 2, f.Calls.Load(), "only the two operations after the breaker opened reached the fallback")
}

func TestTieredBreakerOpensProbesAndCloses(t *testing.T) {
	s, p, f, log := newTiered(t, tiered.WithFailureThreshold(3), tiered.WithCoolDown(50*time.Millisecond))
	p.Set(failing)
	for i := range 3 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrUnavailable, "the primary's failure")
		want := tiered.BreakerClosed
		if i == 2 {
			want = tiered.BreakerOpen
		}
		require.Equal(t, want, s.State(), "after %d failures", i+1)
	}
	assert.EqualValues(t, 3, p.Calls.Load())

	assert.Zero(t, f.Calls.Load(), "closed: the fallback is not asked")

	// Open: the primary is not called; the fallback never saw "k".
	for range 10 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrUnavailable)
	}
	assert.EqualValues(t, 3, p.Calls.Load())
	assert.EqualValues(t, 10, f.Calls.Load())

	// After the cool-down a probe goes to the primary; it still fails.
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "k")
		return p.Calls.Load() == 4
	}, hangDetector, 5*time.Millisecond)
	assert.Equal(t, tiered.BreakerOpen, s.State(), "a failed probe opens again")

	// The primary answers: the next probe closes the breaker.
	p.Set(healthy)
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "k")
		return s.State() == tiered.BreakerClosed
	}, hangDetector, 5*time.Millisecond)
	before := f.Calls.Load()
	for range 10 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	assert.Equal(t, before, f.Calls.Load(), "closed: the fallback is off the path")
	assert.Equal(t, []tiered.EventKind{
		tiered.EventOpen, tiered.EventHalfOpen, tiered.EventOpen, tiered.EventHalfOpen, tiered.EventClosed,
	}, log.kinds())
}

// openBreaker fails the primary until the breaker opens.
func openBreaker(t *testing.T, s tieredStore, p *faultyStore) {
	t.Helper()
	p.Set(failing)
	for s.State() != tiered.BreakerOpen {
		_, err := s.Get(ctx, "probe")
		require.ErrorIs(t, err, store.ErrUnavailable)
	}
}

// recoverPrimary heals the primary and sends operations until the breaker
// closes.
func recoverPrimary(t *testing.T, s tieredStore, p *faultyStore) {
	t.Helper()
	p.Set(healthy)
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.State() == tiered.BreakerClosed
	}, hangDetector, 5*time.Millisecond)
}

func TestTieredCopyForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, p, f, log := newTiered(t, tiered.WithFailureThreshold(1), tiered.WithCoolDown(20*time.Millisecond))
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
		time.Sleep(50 * time.Millisecond) // "short" expires, on the bubble's clock

		recoverPrimary(t, s, p)
		require.Eventually(t, func() bool { return s.Stats().Journal == 0 }, hangDetector, 5*time.Millisecond)

		st := s.Stats()
		assert.EqualValues(t, 2, st.Copied, "live and swapped")
		assert.EqualValues(t, 1, st.Conflicts)
		assert.EqualValues(t, 2, st.Skipped, "short expired, released deleted")
		assert.Zero(t, st.CopyFailed)
		assert.ElementsMatch(t, []string{"live", "swapped"}, log.keysOf(tiered.EventCopied))
		assert.Equal(t, []string{"contested"}, log.keysOf(tiered.EventConflict))

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
	})
}

// An operation on a journaled key copies it forward before the primary
// sees it, even with no background copier (stopped by Close here; the
// tiers, hidden behind bareStore, stay open).
func TestTieredOperationOnJournaledKeyCopiesItFirst(t *testing.T) {
	p := newFaulty(t)
	s := mustTiered(t, bareStore{p}, bareStore{newMem(t)}, tiered.WithFailureThreshold(1), tiered.WithCoolDown(20*time.Millisecond))
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
	s, p, _, _ := newTiered(t, tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Hour))
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
	s, p, _, _ := newTiered(t, tiered.WithFailureThreshold(2), tiered.WithCoolDown(5*time.Millisecond))
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
				assert.True(t, err == nil || errors.Is(err, store.ErrUnavailable), "%v", err)
				_, err = s.Get(ctx, key)
				assert.True(t, err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable), "%v", err)
			}
		})
	}
	for range 5 {
		p.Set(failing)
		time.Sleep(20 * time.Millisecond)
		p.Set(healthy)
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
	s, p, _, log := newTiered(t, tiered.WithFailureThreshold(1), tiered.WithJournalSize(2), tiered.WithCoolDown(time.Hour))
	openBreaker(t, s, p)
	for i := range 3 {
		set, _, err := s.SetNX(ctx, fmt.Sprintf("k%d", i), []byte("v"), time.Minute)
		require.NoError(t, err)
		require.True(t, set)
	}
	st := s.Stats()
	assert.Equal(t, 2, st.Journal)
	assert.EqualValues(t, 1, st.JournalDropped)
	assert.Equal(t, []string{"k2"}, log.keysOf(tiered.EventJournalFull))
}

func TestTieredPing(t *testing.T) {
	s, p, f, _ := newTiered(t)
	require.NoError(t, s.Ping(ctx))
	p.Set(failing)
	require.NoError(t, s.Ping(ctx), "the fallback still serves")
	f.Set(failing)
	require.ErrorIs(t, s.Ping(ctx), store.ErrUnavailable)
}

// A Tiered owns both tiers: Close closes each once, however often it is
// called.
func TestTieredCloseClosesBothTiersOnce(t *testing.T) {
	p, f := &countingCloser{Faulty: newFaulty(t)}, &countingCloser{Faulty: newFaulty(t)}
	s := mustTiered(t, p, f)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.EqualValues(t, 1, p.Closes.Load())
	assert.EqualValues(t, 1, f.Closes.Load())
	_, err := p.Store.Get(ctx, "k")
	assert.ErrorIs(t, err, memstore.ErrClosed)
	_, err = f.Store.Get(ctx, "k")
	assert.ErrorIs(t, err, memstore.ErrClosed)
}

func TestNewTieredRejectsInvalidArguments(t *testing.T) {
	m := newMem(t)
	never := func(_, _ []byte) bool { return false }
	for name, c := range map[string]struct {
		p, f       store.Store
		supersedes func(_, _ []byte) bool
		opt        tiered.Option
		names      string
	}{
		"nil primary":    {nil, m, never, nil, "nil primary"},
		"nil fallback":   {m, nil, never, nil, "nil fallback"},
		"nil supersedes": {m, m, nil, nil, "nil supersedes"},
		"threshold":      {m, m, never, tiered.WithFailureThreshold(0), "WithFailureThreshold(0)"},
		"cool-down":      {m, m, never, tiered.WithCoolDown(-time.Second), "WithCoolDown(-1s)"},
		"journal":        {m, m, never, tiered.WithJournalSize(0), "WithJournalSize(0)"},
		"copy timeout":   {m, m, never, tiered.WithCopyTimeout(0), "WithCopyTimeout(0s)"},
		"observer":       {m, m, never, tiered.WithObserver(nil), "WithObserver(nil)"},
	} {
		var opts []tiered.Option
		if c.opt != nil {
			opts = append(opts, c.opt)
		}
		s, err := tiered.New(c.p, c.f, c.supersedes, opts...)
		assert.ErrorIs(t, err, store.ErrInvalid, name)
		assert.ErrorContains(t, err, c.names, name)
		assert.Nil(t, s, name)
	}
}

// lossyStore applies every call to its memstore and then, while lossy is
// set, reports it as failed: a reply lost after the write (a budget that
// cut the call off, a connection reset after the server applied it).
type lossyStore struct {
	*memstore.Store
	lossy atomic.Bool
}

func (l *lossyStore) lost(op string, err error) error {
	if err == nil && l.lossy.Load() {
		return store.Unavailable(op, errInjected)
	}
	return err
}

func (l *lossyStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	set, e, err := l.Store.SetNX(ctx, key, value, ttl)
	return set, e, l.lost("SetNX", err)
}

func (l *lossyStore) Get(ctx context.Context, key string) (store.Entry, error) {
	e, err := l.Store.Get(ctx, key)
	return e, l.lost("Get", err)
}

func (l *lossyStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	ok, err := l.Store.CompareAndSwap(ctx, key, old, new, ttl)
	return ok, l.lost("CompareAndSwap", err)
}

func (l *lossyStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	ok, err := l.Store.CompareAndDelete(ctx, key, old)
	return ok, l.lost("CompareAndDelete", err)
}

func (l *lossyStore) Consume(ctx context.Context, key string) ([]byte, error) {
	v, err := l.Store.Consume(ctx, key)
	return v, l.lost("Consume", err)
}

// The primary applies writes but loses their replies, while 8 requests
// with distinct keys arrive at once and clients retry every 503. Once the
// primary answers again, each key is sent once more. No key may run its
// work twice: a write whose outcome is unknown must not be re-applied to
// the fallback as if fresh, and copy-forward must not keep an orphan claim
// over the finished result.
func TestTieredAmbiguousWriteNeverRunsTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 8
		p := &lossyStore{Store: newMem(t)}
		p.lossy.Store(true)
		ts := mustTiered(t, p, newMem(t), tiered.WithFailureThreshold(5), tiered.WithCoolDown(20*time.Millisecond))
		t.Cleanup(func() { _ = ts.Close() })
		e, _ := newEngine(t, ts.Store, idemkit.WithLease(300*time.Millisecond))

		var runs [keys]atomic.Int32
		do := func(i int, opts ...idemkit.Option) error {
			_, err := e.Do(ctx, fmt.Sprint("order-", i), "fp", func(context.Context) ([]byte, error) {
				runs[i].Add(1)
				return []byte("done"), nil
			}, opts...)
			return err
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range keys {
			wg.Go(func() {
				<-start
				for range 50 { // a client retrying every 503
					if err := do(i); !errors.Is(err, idemkit.ErrUnavailable) {
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		close(start)
		wg.Wait()

		p.lossy.Store(false)
		require.Eventually(t, func() bool {
			_, _ = ts.Get(ctx, "probe")
			return ts.State() == tiered.BreakerClosed && ts.Stats().Journal == 0
		}, hangDetector, 5*time.Millisecond)
		for i := range keys { // the client's next retry, waiting out any claim still held
			require.NoError(t, do(i, idemkit.WithWait(10*time.Millisecond)), "key %d", i)
		}
		twice := 0
		for i := range keys {
			if runs[i].Load() > 1 {
				twice++
			}
			assert.EqualValues(t, 1, runs[i].Load(), "key %d: runs of its work", i)
		}
		t.Logf("%d of %d keys ran their work twice; stats %+v", twice, keys, ts.Stats())
	})
}

// Tokens issued before an outage are unknown to the fallback. Using one
// while the breaker is open must answer "unavailable" (503, retry later),
// never "invalid" (400, final for the client).
func TestTieredTokenIssuedBeforeOutageIsUnavailableNotInvalid(t *testing.T) {
	const tokens = 200
	s, p, _, _ := newTiered(t, tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Hour))
	e, _ := newEngine(t, s.Store)
	issued := make([]idemkit.Token, tokens)
	for i := range issued {
		tok, err := e.IssueToken(ctx, "alice")
		require.NoError(t, err)
		issued[i] = tok
	}
	openBreaker(t, s, p)

	invalid, unavailable := 0, 0
	for _, tok := range issued {
		_, err := e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) {
			t.Error("fn ran without the token being checked")
			return nil, nil
		})
		switch {
		case errors.Is(err, idemkit.ErrTokenInvalid):
			invalid++
		case errors.Is(err, idemkit.ErrUnavailable):
			unavailable++
		default:
			t.Errorf("UseToken: %v", err)
		}
	}
	t.Logf("%d uses of tokens issued before the outage: %d token-invalid, %d unavailable", tokens, invalid, unavailable)
	assert.Zero(t, invalid, "uses answered token-invalid")
	assert.Equal(t, tokens, unavailable)

	// A token issued during the outage is known to the fallback: it works.
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)
	res, err := e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	assert.Equal(t, "ok", string(res.Value))
	_, err = e.UseToken(ctx, "alice", "bm90LWEtdG9rZW4tZXZlci1pc3N1ZWQ", func(context.Context) ([]byte, error) { return nil, nil })
	assert.ErrorIs(t, err, idemkit.ErrUnavailable, "a token the fallback never saw may exist in the primary")
}

// laterState is a supersedes predicate for test values: "done:X" is a
// later state of "claim:X".
func laterState(held, candidate []byte) bool {
	h, ok1 := strings.CutPrefix(string(held), "claim:")
	c, ok2 := strings.CutPrefix(string(candidate), "done:")
	return ok1 && ok2 && h == c
}

// The primary holds an earlier state of a value the fallback completed
// (this instance's claim, written where the journal could not follow it,
// e.g. while it was full). Copy-forward must replace it with the completed
// value, not keep it as a conflict; a value the predicate does not accept
// still wins.
func TestTieredCopyForwardSupersedesAnEarlierStateOfItsValue(t *testing.T) {
	p := newFaulty(t)
	log := &tierLog{}
	inner, err := tiered.New(p, newMem(t), laterState,
		tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Millisecond), tiered.WithObserver(log.observe))
	require.NoError(t, err)
	s := tieredStore{inner}
	t.Cleanup(func() { _ = s.Close() })
	for k, v := range map[string]string{"mine": "claim:1", "theirs": "claim:2"} {
		set, _, err := p.Store.SetNX(ctx, k, []byte(v), time.Minute)
		require.NoError(t, err)
		require.True(t, set)
	}
	openBreaker(t, s, p)
	for k, v := range map[string]string{"mine": "done:1", "theirs": "done:3"} {
		set, _, err := s.SetNX(ctx, k, []byte(v), time.Minute)
		require.NoError(t, err)
		require.True(t, set)
	}

	p.Set(healthy)
	recoverPrimaryAndDrain(t, s)
	e, err := p.Store.Get(ctx, "mine")
	require.NoError(t, err)
	assert.Equal(t, "done:1", string(e.Value), "the completed value replaced its earlier state")
	e, err = p.Store.Get(ctx, "theirs")
	require.NoError(t, err)
	assert.Equal(t, "claim:2", string(e.Value), "another claim wins")
	st := s.Stats()
	assert.EqualValues(t, 1, st.Superseded)
	assert.EqualValues(t, 1, st.Conflicts)
	assert.Equal(t, []string{"mine"}, log.keysOf(tiered.EventSuperseded))
	assert.Equal(t, []string{"theirs"}, log.keysOf(tiered.EventConflict))
}

// recoverPrimaryAndDrain sends operations until the breaker is closed and
// the journal is empty.
func recoverPrimaryAndDrain(t *testing.T, s tieredStore) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.State() == tiered.BreakerClosed && s.Stats().Journal == 0
	}, hangDetector, 5*time.Millisecond)
}

// A CompareAndDelete the primary did not confirm, because it failed or
// because the breaker was open, is replayed on the primary when it answers
// again, before the key is copied forward or touched there.
func TestTieredUnconfirmedDeleteIsReplayedFirst(t *testing.T) {
	s, p, _, log := newTiered(t, tiered.WithFailureThreshold(2), tiered.WithCoolDown(time.Millisecond))
	for _, k := range []string{"a", "b"} {
		set, _, err := p.Store.SetNX(ctx, k, []byte("orphan-"+k), time.Minute)
		require.NoError(t, err)
		require.True(t, set)
	}
	p.Set(failing)
	ok, err := s.CompareAndDelete(ctx, "a", []byte("orphan-a")) // fails on the primary
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.False(t, ok)
	_, err = s.Get(ctx, "probe") // the second failure opens the breaker
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, tiered.BreakerOpen, s.State())
	ok, err = s.CompareAndDelete(ctx, "b", []byte("orphan-b")) // the fallback never held it
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.False(t, ok)
	set, _, err := s.SetNX(ctx, "b", []byte("mine"), time.Minute) // claimed in the fallback
	require.NoError(t, err)
	require.True(t, set)
	assert.EqualValues(t, 2, s.Stats().DeferredDeletes)

	p.Set(healthy)
	recoverPrimaryAndDrain(t, s)
	_, err = p.Store.Get(ctx, "a")
	assert.ErrorIs(t, err, store.ErrNotFound, "the delete of a was replayed")
	e, err := p.Store.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "mine", string(e.Value), "b's orphan was deleted before b was copied forward")
	st := s.Stats()
	assert.EqualValues(t, 2, st.ReplayedDeletes)
	assert.EqualValues(t, 1, st.Copied)
	assert.Zero(t, st.Conflicts)
	assert.Empty(t, log.keysOf(tiered.EventConflict))
}

// The background copier reads a journaled token from the fallback; before
// it writes it to the primary, an operation on the token copies it forward
// itself and consumes it. The copier's late SetNX must not bring the
// consumed token back: a token is consumed at most once.
func TestTieredCopierDoesNotResurrectConsumedKey(t *testing.T) {
	p := newFaulty(t)
	f := newPausingGet(t, "tok")
	s := mustTiered(t, p, f, tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })

	openBreaker(t, s, p)
	set, _, err := s.SetNX(ctx, "tok", []byte("token"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)

	recoverPrimary(t, s, p) // starts the copier, which pauses inside its read of "tok"
	select {
	case <-f.entered:
	case <-time.After(hangDetector):
		t.Fatal("the copier never read the journaled key")
	}

	var consumed atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err := s.Consume(ctx, "tok")
		if err == nil {
			assert.Equal(t, []byte("token"), v)
			consumed.Add(1)
		}
	}()
	// Let the operation run ahead of the paused copier (a fixed Tiered
	// makes it wait for the copier instead; either order must be safe).
	select {
	case <-done:
	case <-time.After(100 * time.Millisecond):
	}
	close(f.release)
	<-done
	f.waitLateCAD(t)
	require.Eventually(t, func() bool { return s.Stats().Journal == 0 }, hangDetector, time.Millisecond)

	v, err := s.Consume(ctx, "tok")
	if err == nil {
		assert.Equal(t, []byte("token"), v)
		consumed.Add(1)
	} else {
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	assert.EqualValues(t, 1, consumed.Load(), "the token must be consumed exactly once")
	_, err = p.Store.Get(ctx, "tok")
	assert.ErrorIs(t, err, store.ErrNotFound, "the primary must not hold the consumed token")
}

// The copier reads a journaled claim from the fallback; before it writes it
// to the primary, an operation whose primary call fails completes the claim
// in the fallback. The completed value must reach the primary (or be
// reported as a conflict), never be dropped from the journal in silence.
func TestTieredCopierDoesNotDropAConcurrentFallbackWrite(t *testing.T) {
	p := newFaulty(t)
	f := newPausingGet(t, "k")
	log := &tierLog{}
	s := mustTiered(t, p, f, tiered.WithFailureThreshold(100), tiered.WithCoolDown(time.Millisecond), tiered.WithObserver(log.observe))
	t.Cleanup(func() { _ = s.Close() })

	openBreaker(t, s, p)
	set, _, err := s.SetNX(ctx, "k", []byte("claim"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)

	recoverPrimary(t, s, p) // the copier pauses inside its read of "k"
	select {
	case <-f.entered:
	case <-time.After(hangDetector):
		t.Fatal("the copier never read the journaled key")
	}

	p.Set(failing) // the breaker stays closed (threshold 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok, err := s.CompareAndSwap(ctx, "k", []byte("claim"), []byte("done"), time.Minute)
		assert.NoError(t, err)
		assert.True(t, ok)
	}()
	select {
	case <-done:
	case <-time.After(100 * time.Millisecond):
	}
	p.Set(healthy)
	close(f.release)
	<-done
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.Stats().Journal == 0
	}, hangDetector, time.Millisecond)

	e, err := p.Store.Get(ctx, "k")
	require.NoError(t, err)
	if string(e.Value) != "done" {
		assert.Equal(t, []string{"k"}, log.keysOf(tiered.EventConflict),
			"the primary kept %q while the fallback's %q was dropped unreported", e.Value, "done")
	}
}

// A token written in the fallback is copied to the primary by a probe whose
// reply is lost, then used in the fallback. On recovery the primary must
// end with the used token, not keep the stale unused copy (which would let
// the token be used a second time).
func TestTieredFallbackChangeReplacesALostCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &lossyStore{Store: newMem(t)}
		const coolDown = 10 * time.Millisecond
		inner, err := tiered.New(p, newMem(t), func(_, _ []byte) bool { return false },
			tiered.WithFailureThreshold(1), tiered.WithCoolDown(coolDown))
		require.NoError(t, err)
		s := tieredStore{inner}
		t.Cleanup(func() { _ = s.Close() })

		p.lossy.Store(true)
		_, _, err = s.SetNX(ctx, "probe", []byte("v"), time.Minute)
		require.ErrorIs(t, err, store.ErrUnavailable)
		set, _, err := s.SetNX(ctx, "tok", []byte("issued"), time.Minute)
		require.NoError(t, err)
		require.True(t, set)

		time.Sleep(3 * coolDown) // the next operation probes the primary
		ok, err := s.CompareAndSwap(ctx, "tok", []byte("issued"), []byte("used"), time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		e, err := p.Store.Get(ctx, "tok")
		require.NoError(t, err)
		require.Equal(t, "issued", string(e.Value), "the lost copy landed in the primary")

		p.lossy.Store(false)
		recoverPrimaryAndDrain(t, s)
		e, err = p.Store.Get(ctx, "tok")
		require.NoError(t, err)
		assert.Equal(t, "used", string(e.Value))
		assert.Zero(t, s.Stats().Conflicts)
	})
}

// 64 goroutines claim one key while the primary fails and the breaker
// opens under them: those the primary failed get ErrUnavailable, the rest
// meet in the fallback, where exactly one wins; on recovery its claim is
// the one the primary holds.
func TestTieredOneWinnerWhileTheBreakerOpens(t *testing.T) {
	for round := range 10 {
		s, p, _, _ := newTiered(t, tiered.WithFailureThreshold(8), tiered.WithCoolDown(time.Millisecond))
		p.Set(failing)
		var wins, refused atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 64 {
			wg.Go(func() {
				<-start
				v := fmt.Appendf(nil, "v%d", i)
				set, _, err := s.SetNX(ctx, "k", v, time.Minute)
				switch {
				case err != nil:
					assert.ErrorIs(t, err, store.ErrUnavailable)
					refused.Add(1)
				case set:
					wins.Add(1)
					winner.Store(v)
				}
			})
		}
		close(start)
		wg.Wait()
		if refused.Load() == 64 {
			require.Zero(t, wins.Load())
			continue // the breaker opened after every call had reached the primary
		}
		require.EqualValues(t, 1, wins.Load(), "round %d: winners among the %d calls the fallback answered", round, 64-refused.Load())
		p.Set(healthy)
		recoverPrimaryAndDrain(t, s)
		e, err := p.Store.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, winner.Load(), e.Value, "round %d", round)
	}
}

// A panicking tier observer is recovered, as the engine recovers a
// panicking Observer: it must not fail the operation that reported (the
// claim that tripped the breaker, a claim made in the fallback while the
// journal is full), leave a claim held, or kill the process from the
// background copier.
func TestTieredObserverPanicsAreRecovered(t *testing.T) {
	p := newFaulty(t)
	// The cool-down outlasts the outage's calls on a loaded machine: a
	// half-open probe to the failing primary would refuse them.
	s := mustTiered(t, p, newMem(t), tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Second),
		tiered.WithJournalSize(2), tiered.WithObserver(func(tiered.Event) { panic("observer bug") }))
	t.Cleanup(func() { _ = s.Close() })
	e, _ := newEngine(t, s.Store)
	runs := 0
	ok := func(context.Context) ([]byte, error) { runs++; return []byte("ok"), nil }
	do := func(key string) (res idemkit.Result, err error) {
		t.Helper()
		require.NotPanics(t, func() { res, err = e.Do(ctx, key, "", ok) }, key)
		return res, err
	}

	p.Set(failing)
	_, err := do("trip") // its failure opens the breaker (TierOpen); its undo is journaled
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	require.Equal(t, tiered.BreakerOpen, s.State())
	for _, k := range []string{"a", "b"} { // b finds the journal full: TierJournalFull, and b is never copied
		_, err := do(k)
		require.NoError(t, err, k)
	}
	assert.Equal(t, 2, runs)
	for _, k := range []string{"a", "b"} {
		res, err := do(k)
		require.NoError(t, err, k)
		assert.True(t, res.Replayed, "%s: the fallback holds its result, not a claim", k)
	}

	recoverPrimary(t, s, p) // TierClosed, then the copier reports TierCopied
	require.Eventually(t, func() bool { return s.Stats().Journal == 0 }, hangDetector, 5*time.Millisecond)
	assert.EqualValues(t, 1, s.Stats().Copied)
	res, err := do("a")
	require.NoError(t, err)
	assert.True(t, res.Replayed, "a was copied forward")
	assert.Equal(t, 2, runs)
}
