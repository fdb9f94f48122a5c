package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// lateCtx is a context whose deadline has passed but whose timer has not
// fired yet, so Err still returns nil: the state a go-redis call with
// ContextTimeoutEnabled returns in when the socket deadline (set to the
// ctx deadline) fires first.
type lateCtx struct {
	context.Context
	deadline time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func TestFailPassedDeadlineBeforeCtxTimerFires(t *testing.T) {
	ctx := lateCtx{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	require.NoError(t, ctx.Err())
	got := (&Store{}).fail(ctx, "op", "k", errIOTimeout{})
	require.ErrorIs(t, got, context.DeadlineExceeded, "the caller's deadline passed: %v", got)
	require.ErrorIs(t, got, store.ErrUnavailable)
	require.ErrorIs(t, got, errIOTimeout{})

	// A deadline still in the future is the client's own timeout, not the
	// caller's.
	future := lateCtx{Context: context.Background(), deadline: time.Now().Add(time.Hour)}
	got = (&Store{}).fail(future, "op", "k", errIOTimeout{})
	require.NotErrorIs(t, got, context.DeadlineExceeded)
	require.ErrorIs(t, got, store.ErrUnavailable)
}

// errIOTimeout is a net.Error timeout, as a socket deadline reports.
type errIOTimeout struct{}

func (errIOTimeout) Error() string   { return "i/o timeout" }
func (errIOTimeout) Timeout() bool   { return true }
func (errIOTimeout) Temporary() bool { return true }

// Before Redis 7.0 an error raised by redis.call inside a script reached
// the client wrapped as "ERR Error running script ...: -CODE message".
func TestFailClassifiesPre70ScriptErrors(t *testing.T) {
	s := &Store{}
	wrap := func(inner string) error {
		return replyErr("ERR Error running script (call to f_1028a5dba704e1d8a01fd96efeba25bb78f62df2): @user_script:4: @user_script: 4: -" + inner)
	}
	for _, inner := range []string{
		"READONLY You can't write against a read only replica.",
		"OOM command not allowed when used memory > 'maxmemory'.",
		"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
		"NOREPLICAS Not enough good replicas to write.",
	} {
		err := wrap(inner)
		got := s.fail(context.Background(), "op", "k", err)
		require.ErrorIs(t, got, store.ErrUnavailable, "%v", err)
		require.ErrorIs(t, got, err)
	}
	got := s.fail(context.Background(), "op", "k", wrap("WRONGTYPE Operation against a key holding the wrong kind of value"))
	require.ErrorIs(t, got, store.ErrCorrupt)

	// A script error that carries no outage code stays a plain error.
	got = s.fail(context.Background(), "op", "k", replyErr("ERR Error running script (call to f_x): @user_script:1: user_script:1: Script attempted to access nonexistent global variable 'x'"))
	require.NotErrorIs(t, got, store.ErrUnavailable)
	require.NotErrorIs(t, got, store.ErrCorrupt)
}

// MISCONF: a server whose snapshots fail refuses writes
// (stop-writes-on-bgsave-error), an outage like OOM.
func TestFailClassifiesMisconf(t *testing.T) {
	err := replyErr("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled.")
	got := (&Store{}).fail(context.Background(), "op", "k", err)
	require.ErrorIs(t, got, store.ErrUnavailable)
	require.ErrorIs(t, got, err)
}
