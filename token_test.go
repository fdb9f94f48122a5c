package idemkit_test

import (
	"context"
	"errors"
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

func TestTokens(t *testing.T) {
	ctx := context.Background()
	e := testkit.NewEngine(t)
	ok := func(context.Context) ([]byte, error) { return []byte("paid"), nil }

	t.Run("used once then replayed", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, idemkit.DefaultTokenTTL, tok.ExpiresIn)
		res, err := e.UseToken(ctx, "alice", tok.Value, ok)
		require.NoError(t, err)
		assert.False(t, res.Replayed)
		res, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
		require.NoError(t, err)
		assert.True(t, res.Replayed)
		assert.Equal(t, "paid", string(res.Value))
	})
	t.Run("other principal, forged, malformed", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "alice")
		require.NoError(t, err)
		_, err = e.UseToken(ctx, "mallory", tok.Value, ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		_, err = e.UseToken(ctx, "alice", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		_, err = e.UseToken(ctx, "alice", "not a token!", ok)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		_, err = e.UseToken(ctx, "alice", tok.Value, ok)
		require.NoError(t, err, "the other principal's attempt spent the owner's token")
	})
	t.Run("expired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t) // in the bubble: its clock and goroutines are the bubble's
			tok, err := e.IssueToken(ctx, "bob", idemkit.WithTokenTTL(30*time.Millisecond))
			require.NoError(t, err)
			time.Sleep(60 * time.Millisecond)
			_, err = e.UseToken(ctx, "bob", tok.Value, ok)
			require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
		})
	})
	t.Run("failed use spends the token", func(t *testing.T) {
		tok, err := e.IssueToken(ctx, "carol")
		require.NoError(t, err)
		_, err = e.UseToken(ctx, "carol", tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("declined") })
		require.EqualError(t, err, "declined")
		_, err = e.UseToken(ctx, "carol", tok.Value, ok)
		require.ErrorIs(t, err, idemkit.ErrTokenUsed)
		require.ErrorIs(t, err, idemkit.ErrTokenInvalid)
	})
	t.Run("concurrent uses run once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := testkit.NewEngine(t) // in the bubble: its clock and goroutines are the bubble's
			tok, err := e.IssueToken(ctx, "dave")
			require.NoError(t, err)
			var runs, inProgress, replayed atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 64 {
				wg.Go(func() {
					<-start
					res, err := e.UseToken(ctx, "dave", tok.Value, func(context.Context) ([]byte, error) {
						runs.Add(1)
						time.Sleep(20 * time.Millisecond)
						return []byte("once"), nil
					})
					switch {
					case errors.Is(err, idemkit.ErrInProgress):
						inProgress.Add(1)
					case err == nil && res.Replayed:
						replayed.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			require.EqualValues(t, 1, runs.Load())
			assert.EqualValues(t, 63, inProgress.Load()+replayed.Load())
		})
	})
}

func TestTokensAreUnique(t *testing.T) {
	e := testkit.NewEngine(t)
	seen := map[string]bool{}
	for range 1000 {
		tok, err := e.IssueToken(context.Background(), "p")
		require.NoError(t, err)
		require.False(t, seen[tok.Value])
		seen[tok.Value] = true
	}
}

// TestUseTokenOwnClaimReadBackCountsAsOurs: a token claim whose swap the
// store applied but reported as not applied (a client library retried the
// swap after losing its reply, and the retry found the value changed) is
// this caller's own claim, recognised by its unique owner nonce, as Do's
// claim is: fn runs, instead of the caller getting ErrInProgress for its
// own claim and the token dying with the lease.
func TestUseTokenOwnClaimReadBackCountsAsOurs(t *testing.T) {
	ctx := context.Background()
	mem := testkit.NewMem(t)
	s := &casRetried{Store: mem}
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	tok, err := e.IssueToken(ctx, "alice")
	require.NoError(t, err)
	s.on.Store(true)
	runs := 0
	res, err := e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { runs++; return []byte("x"), nil })
	require.NoError(t, err, "our own claim read back must count as ours")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, runs)
	res, err = e.UseToken(ctx, "alice", tok.Value, nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
}

// appliedButFailed is a Store whose next CompareAndSwap, once armed, is
// applied but reported as failed, as redisstore does with
// WithWaitReplicas when replicas do not confirm in time: (true, error
// wrapping ErrUnavailable).
type appliedButFailed struct {
	store.Store
	armed atomic.Bool
}

func (s *appliedButFailed) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	ok, err := s.Store.CompareAndSwap(ctx, k, old, nw, ttl)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return ok, store.Unavailable("cas", errors.New("NOREPLICAS: applied on the primary only"))
	}
	return ok, err
}

// A token claim the store applied but reported as failed must be undone,
// as Do's and Guard's claims are: the user was told the store failed and
// nothing ran, so a retry must be able to use the token.
func TestUseTokenClaimReportedFailedIsUndone(t *testing.T) {
	ctx := context.Background()
	s := &appliedButFailed{Store: testkit.NewMem(t)}
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
func TestUseTokenClaimWithLostReplyIsPutBack(t *testing.T) {
	l := &lostSwapReply{Store: testkit.NewMem(t)}
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
