package idemkit_test

// Tests written during an adversarial review of the engine. Each one
// demonstrates a defect; the review report describes the recommended fix.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

func newMem(t *testing.T) *memstore.Store {
	t.Helper()
	s := mustMem()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rvAppliedButFailed is a Store whose next CompareAndSwap, once armed, is
// applied but reported as failed, as redisstore does with
// WithWaitReplicas when replicas do not confirm in time: (true, error
// wrapping ErrUnavailable).
type rvAppliedButFailed struct {
	store.Store
	armed atomic.Bool
}

func (s *rvAppliedButFailed) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	ok, err := s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return ok, store.Unavailable("cas", errors.New("NOREPLICAS: applied on the primary only"))
	}
	return ok, err
}

// A token claim the store applied but reported as failed must be undone,
// as Do's and Guard's claims are: the user was told the store failed and
// nothing ran, so a retry must be able to use the token.
func TestEdgeUseTokenClaimReportedFailedIsUndone(t *testing.T) {
	ctx := context.Background()
	s := &rvAppliedButFailed{Store: newMem(t)}
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)

	s.armed.Store(true)
	ran := 0
	_, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { ran++; return []byte("paid"), nil })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	require.Zero(t, ran, "fail-closed must not run fn")

	res, err := e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { ran++; return []byte("paid"), nil })
	require.NoError(t, err, "the token stays claimed by a use that was reported as failed")
	assert.Equal(t, 1, ran)
	assert.Equal(t, "paid", string(res.Value))
}

// rvNamingStore fails every operation while down with an error that names
// the key, as redisstore (WAIT not confirmed, other replies) and boltstore
// (corrupt entries, the contract's ErrCorrupt rule) do.
type rvNamingStore struct {
	store.Store
	down atomic.Bool
}

func (s *rvNamingStore) fail(op, key string) error {
	return fmt.Errorf("fakestore: %s %q: the write was applied on the primary, but not replicated: %w", op, key, store.ErrUnavailable)
}

func (s *rvNamingStore) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if s.down.Load() {
		return false, store.Entry{}, s.fail("setnx", k)
	}
	return s.Store.SetNX(ctx, k, v, ttl)
}

func (s *rvNamingStore) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, s.fail("cas", k)
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

// The default observer promises never to log raw keys, but it logs store
// errors verbatim, and stores name the key in their errors: idempotency
// keys and one-time tokens (credentials) end up in the logs.
func TestEdgeSlogObserverRedactsKeysInStoreErrors(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := &rvNamingStore{Store: newMem(t)}
	e, err := idemkit.New(s, idemkit.WithObserver(idemkit.SlogObserver(l)))
	require.NoError(t, err)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)

	s.down.Store(true)
	secret := "user-42-card-4111111111111111"
	_, err = e.Do(ctx, secret, "", func(context.Context) ([]byte, error) { return nil, nil })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	_, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return nil, nil })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)

	out := buf.String()
	require.Contains(t, out, "idemkit: store_error")
	assert.NotContains(t, out, "4111111111111111", "raw idempotency key logged")
	assert.NotContains(t, out, tok.Value, "raw one-time token logged")
}

// A fn that ends its goroutine with runtime.Goexit (t.FailNow or
// require.* inside fn, as this package's own tests do) neither panics nor
// returns: the heartbeat is never stopped and keeps the key claimed
// forever (and the timer beats the store forever).
func TestEdgeDoGoexitInFnDoesNotLockKeyForever(t *testing.T) {
	e := newEngine(t, idemkit.WithLease(60*time.Millisecond), idemkit.WithHeartbeat(10*time.Millisecond))
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
}

// A value that decodes as an unused token (two bytes {1, 1}) in Do's key
// space makes Do loop, without WithWait, until ctx ends (forever with
// context.Background) instead of reporting a corrupt record.
func TestEdgeDoOnIssuedTokenRecordIsCorruptNotALoop(t *testing.T) {
	s := newMem(t)
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

// A result under the engine's cap whose record exceeds the store's value
// limit was refused by the store with ErrInvalid, which the engine
// reported as ErrUnavailable (a policy layer counts it as an outage),
// leaving the key claimed until the lease expired. It is a result too
// large to keep like any other: a terminal record by default.
func TestEdgeDoResultOverStoreLimit(t *testing.T) {
	s := newMem(t)
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithMaxResultSize(store.MaxValueLen))
	if err != nil {
		// Rejecting a cap the store cannot hold is an acceptable fix too.
		require.ErrorIs(t, err, idemkit.ErrInvalid)
		return
	}
	ctx := context.Background()
	fp := strings.Repeat("f", 64)
	_, err = e.Do(ctx, "k", fp, func(context.Context) ([]byte, error) { return make([]byte, store.MaxValueLen), nil })
	require.Error(t, err)
	assert.NotErrorIs(t, err, idemkit.ErrUnavailable, "the store did not fail; the record was too large")
	assert.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err := e.Do(ctx, "k", fp, func(context.Context) ([]byte, error) { return []byte("small"), nil })
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge, "the key must keep its terminal record as for any refused result")
	assert.True(t, res.Replayed)
}

// When fn fails after its lease was lost, the release deletes nothing, yet
// the observer is told the claim was released.
func TestEdgeReleaseAfterLostLeaseIsNotReportedAsReleased(t *testing.T) {
	rec := &recorder{}
	e := newEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat(), idemkit.WithObserver(rec))
	_, err := e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) {
		time.Sleep(80 * time.Millisecond) // the lease expires while fn runs
		return nil, errors.New("failed")
	})
	require.EqualError(t, err, "failed")
	assert.Zero(t, rec.count(idemkit.EventReleased), "nothing was released")
	assert.Equal(t, 1, rec.count(idemkit.EventLeaseLost), "the lost lease is an outcome to observe")
}

// A heartbeat interval not shorter than the lease is accepted, and then
// the lease expires between beats: a duplicate takes the key over and fn
// runs twice. Here the engine's heartbeat is fine for its own lease and
// the per-call lease makes it useless.
func TestEdgeHeartbeatMustBeShorterThanLease(t *testing.T) {
	e := newEngine(t, idemkit.WithHeartbeat(time.Second)) // lease 30s: fine
	ctx := context.Background()
	var runs atomic.Int32
	var dupErr error
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
		runs.Add(1)
		time.Sleep(time.Second) // several leases
		_, dupErr = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { runs.Add(1); return nil, nil },
			idemkit.WithLease(300*time.Millisecond))
		return []byte("mine"), nil
	}, idemkit.WithLease(300*time.Millisecond))
	if errors.Is(err, idemkit.ErrInvalid) {
		require.Zero(t, runs.Load(), "rejecting the combination is an acceptable fix")
		return
	}
	require.ErrorIs(t, dupErr, idemkit.ErrInProgress, "the duplicate took the key over")
	require.EqualValues(t, 1, runs.Load(), "fn ran twice for one key")
	require.NoError(t, err)
}

// rvTimeoutAfterWrite is a Store whose next SetNX, once armed, is applied
// but answered with a timeout (the reply was lost): the contract says
// nothing can be concluded about the key's state.
type rvTimeoutAfterWrite struct {
	store.Store
	armed atomic.Bool
}

func (s *rvTimeoutAfterWrite) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
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
func TestEdgeClaimWithUnknownOutcomeIsUndone(t *testing.T) {
	ctx := context.Background()
	s := &rvTimeoutAfterWrite{Store: newMem(t)}
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

// The same hole in Guard: with ReleaseOnError, a fn that ends with
// runtime.Goexit neither returns an error nor panics, and the claim is
// kept for the whole window.
func TestEdgeGuardGoexitInFnReleasesClaim(t *testing.T) {
	e := newEngine(t, idemkit.WithWindow(time.Minute), idemkit.WithRelease(idemkit.ReleaseOnError))
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

// slowBeats is a Store whose lease extensions (CompareAndSwap with equal
// old and new values) take a while, counting those under way.
type slowBeats struct {
	store.Store
	running atomic.Int32
}

func (s *slowBeats) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if bytes.Equal(old, nw) {
		s.running.Add(1)
		defer s.running.Add(-1)
		time.Sleep(15 * time.Millisecond)
	}
	return s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func TestEdgeDoWaitsForHeartbeatUnderWay(t *testing.T) {
	mem := mustMem()
	defer mem.Close()
	s := &slowBeats{Store: mem}
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithLease(300*time.Millisecond), idemkit.WithHeartbeat(2*time.Millisecond))
	require.NoError(t, err)
	for i := range 20 {
		_, err := e.Do(context.Background(), fmt.Sprint("k", i), "", func(context.Context) ([]byte, error) {
			time.Sleep(5 * time.Millisecond) // a beat is likely under way when fn returns
			return []byte("v"), nil
		})
		require.NoError(t, err)
		require.Zero(t, s.running.Load(), "a heartbeat's store call outlived Do")
	}
}

// lostSwapReply applies its next CompareAndSwap, then reports it as failed
// with ok == false, as a store does when the reply is lost.
type lostSwapReply struct {
	store.Store
	armed atomic.Bool
}

func (l *lostSwapReply) CompareAndSwap(ctx context.Context, k string, old, v []byte, ttl time.Duration) (bool, error) {
	ok, err := l.Store.CompareAndSwap(ctx, k, old, v, ttl)
	if l.armed.CompareAndSwap(true, false) {
		return false, store.Unavailable("cas", errors.New("reply lost"))
	}
	return ok, err
}

// A token use whose claim landed but whose reply was lost must put the
// token back, or the owner's retry gets "in progress" until the lease ends.
func TestEdgeTokenClaimWithLostReplyIsPutBack(t *testing.T) {
	l := &lostSwapReply{Store: newMem(t)}
	e, err := idemkit.New(l, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)
	l.armed.Store(true)
	_, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	res, err := e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return []byte("paid"), nil })
	require.NoError(t, err, "the retry finds the token usable")
	assert.Equal(t, "paid", string(res.Value))
}
