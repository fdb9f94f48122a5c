package policy_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// pausingGet is a store whose first Get of key reads the entry and then
// waits for release before returning it, so a test can hold a copy-forward
// between its read of the fallback and its write to the primary.
type pausingGet struct {
	bareStore
	key     string
	paused  atomic.Bool
	entered chan struct{}
	release chan struct{}
	// lateCAD is closed by the first CompareAndDelete of key that starts
	// after release: the paused copier's last store call.
	lateCAD  chan struct{}
	lateOnce atomic.Bool
}

func (p *pausingGet) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	ok, err := p.bareStore.CompareAndDelete(ctx, key, old)
	select {
	case <-p.release:
		if key == p.key && p.lateOnce.CompareAndSwap(false, true) {
			close(p.lateCAD)
		}
	default:
	}
	return ok, err
}

// waitLateCAD waits for the paused copier to finish its copy.
func (p *pausingGet) waitLateCAD(t *testing.T) {
	t.Helper()
	select {
	case <-p.lateCAD:
	case <-time.After(hangDetector):
		t.Fatal("the copier never finished its copy")
	}
}

func newPausingGet(key string) *pausingGet {
	return &pausingGet{bareStore: bareStore{memstore.New()}, key: key, entered: make(chan struct{}), release: make(chan struct{}), lateCAD: make(chan struct{})}
}

func (p *pausingGet) Get(ctx context.Context, key string) (store.Entry, error) {
	e, err := p.bareStore.Get(ctx, key)
	if key == p.key && p.paused.CompareAndSwap(false, true) {
		close(p.entered)
		<-p.release
	}
	return e, err
}

// The background copier reads a journaled token from the fallback; before
// it writes it to the primary, an operation on the token copies it forward
// itself and consumes it. The copier's late SetNX must not bring the
// consumed token back: a token is consumed at most once.
func TestReviewTieredCopierDoesNotResurrectConsumedKey(t *testing.T) {
	p := newFaulty(t)
	f := newPausingGet("tok")
	s := mustTiered(t, p, f, policy.WithFailureThreshold(1), policy.WithCoolDown(time.Millisecond))
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
func TestReviewTieredCopierDoesNotDropAConcurrentFallbackWrite(t *testing.T) {
	p := newFaulty(t)
	f := newPausingGet("k")
	log := &tierLog{}
	s := mustTiered(t, p, f, policy.WithFailureThreshold(100), policy.WithCoolDown(time.Millisecond), policy.WithTierObserver(log.observe))
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

	p.set(failing) // the breaker stays closed (threshold 100)
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
	p.set(healthy)
	close(f.release)
	<-done
	require.Eventually(t, func() bool {
		_, _ = s.Get(ctx, "probe")
		return s.Stats().Journal == 0
	}, hangDetector, time.Millisecond)

	e, err := p.Store.Get(ctx, "k")
	require.NoError(t, err)
	if string(e.Value) != "done" {
		assert.Equal(t, []string{"k"}, log.keysOf(policy.TierConflict),
			"the primary kept %q while the fallback's %q was dropped unreported", e.Value, "done")
	}
}

// A store that hangs forever, ignoring its context, must not make a
// detached Budget pile up one goroutine per call: calls still running past
// their budget are bounded, and beyond the bound a call fails at once.
func TestReviewBudgetBoundsAbandonedCalls(t *testing.T) {
	f := newFaulty(t)
	f.set(hanging) // released by the test's cleanup
	s := mustBudget(t, f, time.Millisecond)
	const bound = policy.DefaultMaxAbandoned
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
	assert.LessOrEqual(t, f.calls.Load(), int64(bound+workers), "calls handed to the hung store")
}

// hungGet is a store whose Get blocks, ignoring its context, until release
// is closed.
type hungGet struct {
	bareStore
	release chan struct{}
	calls   atomic.Int64
}

func (h *hungGet) Get(ctx context.Context, key string) (store.Entry, error) {
	h.calls.Add(1)
	<-h.release
	return h.bareStore.Get(ctx, key)
}

// Past the bound, calls fail at once without reaching the store; once the
// hung calls return, calls reach the store again.
func TestReviewBudgetMaxAbandonedRecovers(t *testing.T) {
	h := &hungGet{bareStore: bareStore{memstore.New()}, release: make(chan struct{})}
	s := mustBudget(t, h, time.Millisecond, policy.WithMaxAbandoned(2))
	for range 2 {
		_, err := s.Get(ctx, "k")
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	_, err := s.Get(ctx, "k")
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
