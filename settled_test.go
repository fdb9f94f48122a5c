package idemkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestSupersedes takes real values from the engine at each stage of a Do
// and of a token, and checks which may replace which.
func TestSupersedes(t *testing.T) {
	mem := testkit.NewMem(t)
	e, err := idemkit.New(mem, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()
	read := func(key string) []byte {
		ent, err := mem.Get(ctx, key)
		require.NoError(t, err)
		return ent.Value
	}
	var claimA, claimB []byte
	_, err = e.Do(ctx, "a", "", func(context.Context) ([]byte, error) {
		claimA = read(idemkit.StoreKey(e, idemkit.ModeDo, "", "a"))
		return []byte("done"), nil
	})
	require.NoError(t, err)
	doneA := read(idemkit.StoreKey(e, idemkit.ModeDo, "", "a"))
	_, err = e.Do(ctx, "b", "", func(context.Context) ([]byte, error) {
		claimB = read(idemkit.StoreKey(e, idemkit.ModeDo, "", "b"))
		return nil, errors.New("fails, key released")
	})
	require.Error(t, err)

	assert.True(t, idemkit.Supersedes(claimA, doneA), "own claim completed")
	assert.False(t, idemkit.Supersedes(doneA, claimA), "a result is never replaced by its claim")
	assert.False(t, idemkit.Supersedes(claimB, doneA), "another owner's result")
	assert.False(t, idemkit.Supersedes(claimA, claimA), "same value")
	assert.False(t, idemkit.Supersedes(doneA, doneA))
	assert.False(t, idemkit.Supersedes([]byte("junk"), doneA))
	assert.False(t, idemkit.Supersedes(claimA, []byte("junk")))

	tok, err := e.IssueToken(ctx, "alice", idemkit.WithTokenTTL(time.Minute))
	require.NoError(t, err)
	tk := idemkit.StoreKey(e, idemkit.ModeToken, "alice", tok.Value)
	issued := read(tk)
	_, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) { return []byte("used"), nil })
	require.NoError(t, err)
	used := read(tk)
	assert.True(t, idemkit.Supersedes(issued, used), "a used token replaces the unused one")
	assert.False(t, idemkit.Supersedes(used, issued), "a used token never comes back")
}

func TestSettled(t *testing.T) {
	s := testkit.NewMem(t)
	ctx := context.Background()
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWindow(time.Minute))
	require.NoError(t, err)
	value := func(key string) []byte {
		ent, err := s.Get(ctx, key)
		require.NoError(t, err)
		return ent.Value
	}
	require.NoError(t, e.Guard(ctx, "kept", func(context.Context) error { return nil }))
	assert.True(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeGuard, "", "kept"))))
	require.NoError(t, e.Guard(ctx, "rel", func(context.Context) error {
		assert.False(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeGuard, "", "rel"))), "a releasable claim")
		return nil
	}, idemkit.WithRelease(idemkit.ReleaseOnError)))
	_, err = e.Do(ctx, "do", "", func(context.Context) ([]byte, error) {
		assert.False(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeDo, "", "do"))), "in progress")
		return []byte("r"), nil
	})
	require.NoError(t, err)
	assert.True(t, idemkit.Settled(value(idemkit.StoreKey(e, idemkit.ModeDo, "", "do"))), "completed")
	assert.False(t, idemkit.Settled([]byte("junk")))
	assert.False(t, idemkit.Settled(nil))
}
