package idemkit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

func TestBeginCompleteReplays(t *testing.T) {
	e := testkit.NewEngine(t)
	ctx := context.Background()
	c, res, err := e.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	require.NotNil(t, c)
	defer c.Release(ctx)
	assert.False(t, res.Replayed)

	_, _, err = e.Begin(ctx, "k", "fp")
	require.ErrorIs(t, err, idemkit.ErrInProgress)
	_, _, err = e.Begin(ctx, "k", "other")
	require.ErrorIs(t, err, idemkit.ErrMismatch)

	require.NoError(t, c.Complete(ctx, []byte("result")))
	c.Release(ctx) // deferred in real code: a no-op after Complete
	require.NoError(t, c.Complete(ctx, []byte("ignored")), "a second end changes nothing")

	again, res, err := e.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	assert.Nil(t, again)
	assert.True(t, res.Replayed)
	assert.Equal(t, "result", string(res.Value))
}

func TestBeginRaceHasOneWinner(t *testing.T) {
	e := testkit.NewEngine(t)
	ctx := context.Background()
	for round := range 20 {
		key := "race-" + string(rune('a'+round))
		var winners atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				c, _, err := e.Begin(ctx, key, "")
				if c != nil {
					winners.Add(1)
					require.NoError(t, c.Complete(ctx, []byte("v")))
					return
				}
				if err != nil {
					assert.ErrorIs(t, err, idemkit.ErrInProgress)
				}
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, winners.Load(), "round %d", round)
	}
}

func TestClaimFailReleasesOrRecordsFinal(t *testing.T) {
	errFinal := errors.New("declined")
	e := testkit.NewEngine(t, idemkit.WithErrorCodec(idemkit.FinalErrors(errFinal)))
	ctx := context.Background()
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	boom := errors.New("transient")
	require.Equal(t, boom, c.Fail(ctx, boom))
	c, _, err = e.Begin(ctx, "k", "")
	require.NoError(t, err)
	require.NotNil(t, c, "a transient failure released the key")
	require.ErrorIs(t, c.Fail(ctx, errFinal), errFinal)
	again, res, err := e.Begin(ctx, "k", "")
	assert.Nil(t, again)
	assert.True(t, res.Replayed)
	require.ErrorIs(t, err, errFinal)
}

// swapCount counts CompareAndSwap calls.
type swapCount struct {
	store.Store
	n atomic.Int32
}

func (s *swapCount) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	s.n.Add(1)
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
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
	mem := testkit.NewMem(t)

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
	mem := testkit.NewMem(t)
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

// lostSetNXReply is a Store whose next SetNX, once armed, is applied
// but answered with a timeout (the reply was lost): the contract says
// nothing can be concluded about the key's state.
type lostSetNXReply struct {
	store.Store
	armed atomic.Bool
}

func (s *lostSetNXReply) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	set, existing, err := s.Store.SetNX(ctx, k, v, ttl)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return false, store.Entry{}, store.Unavailable("setnx", errors.New("i/o timeout"))
	}
	return set, existing, err
}

// A claim whose outcome is unknown (ErrUnavailable) may have been written.
// The engine undoes it only when the store says set=true, so after a lost
// reply the caller is told nothing ran, and its retry is refused as a
// duplicate or in-progress request for a whole window or lease.
func TestClaimWithUnknownOutcomeIsUndone(t *testing.T) {
	ctx := context.Background()
	s := &lostSetNXReply{Store: testkit.NewMem(t)}
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWindow(time.Minute))
	require.NoError(t, err)

	t.Run("do", func(t *testing.T) {
		s.armed.Store(true)
		_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil })
		require.NoError(t, err, "the retry of a request that never ran is refused")
		assert.Equal(t, "ran", string(res.Value))
	})
	t.Run("guard", func(t *testing.T) {
		s.armed.Store(true)
		err := e.Guard(ctx, "g", func(context.Context) error { return errors.New("must not run") })
		require.ErrorIs(t, err, idemkit.ErrUnavailable)
		ran := false
		require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { ran = true; return nil }),
			"the retry of a request that never ran is refused as a duplicate")
		assert.True(t, ran)
	})
}
