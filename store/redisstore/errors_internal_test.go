package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// replyErr is a Redis error reply, as go-redis reports one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

var _ redis.Error = replyErr("")

func TestFailClassifiesErrors(t *testing.T) {
	unavailable := []error{
		io.EOF,
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")},
		redis.ErrClosed,
		redis.ErrPoolTimeout,
		replyErr("LOADING Redis is loading the dataset in memory"),
		replyErr("READONLY You can't write against a read only replica."),
		replyErr("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
		replyErr("CLUSTERDOWN The cluster is down"),
		replyErr("TRYAGAIN Multiple keys request during rehashing of slot"),
		replyErr("MOVED 3999 127.0.0.1:6381"),
		replyErr("ASK 3999 127.0.0.1:6381"),
		replyErr("OOM command not allowed when used memory > 'maxmemory'."),
		replyErr("NOREPLICAS Not enough good replicas to write."),
		replyErr("BUSY Redis is busy running a script."),
		replyErr("ERR max number of clients reached"),
	}
	s := &Store{}
	for _, err := range unavailable {
		got := s.fail(context.Background(), "op", "k", err)
		require.ErrorIs(t, got, store.ErrUnavailable, "%v", err)
		require.ErrorIs(t, got, err, "the original error must stay in the chain")
	}

	got := s.fail(context.Background(), "op", "k", replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"))
	require.ErrorIs(t, got, store.ErrCorrupt)
	require.Contains(t, got.Error(), keyRef("k"))
	require.NotContains(t, got.Error(), `"k"`)

	for _, err := range []error{replyErr("NOPERM this user has no permissions"), replyErr("ERR unknown command 'GETDEL'")} {
		got := s.fail(context.Background(), "op", "k", err)
		require.NotErrorIs(t, got, store.ErrUnavailable, "%v", err)
		require.NotErrorIs(t, got, store.ErrCorrupt, "%v", err)
		require.ErrorIs(t, got, err)
	}
}

func TestFailWrapsContextErrors(t *testing.T) {
	s := &Store{}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	got := s.fail(cancelled, "op", "k", io.EOF)
	require.ErrorIs(t, got, context.Canceled)
	require.ErrorIs(t, got, io.EOF)
	require.NotErrorIs(t, got, store.ErrUnavailable, "a caller who gave up is not an outage")

	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	got = s.fail(expired, "op", "k", io.EOF)
	require.ErrorIs(t, got, context.DeadlineExceeded)
	require.ErrorIs(t, got, store.ErrUnavailable)
	require.ErrorIs(t, got, io.EOF)

	require.ErrorIs(t, checkCtx(expired, "op"), context.DeadlineExceeded)
	require.ErrorIs(t, checkCtx(expired, "op"), store.ErrUnavailable)
	require.NoError(t, checkCtx(context.Background(), "op"))
}

func TestDecodeEntry(t *testing.T) {
	e, err := decodeEntry("get", "k", []any{"v", int64(1500)})
	require.NoError(t, err)
	require.Equal(t, store.Entry{Value: []byte("v"), TTL: 1500 * time.Millisecond}, e)

	e, err = decodeEntry("get", "k", []any{"v", int64(0)})
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, e.TTL, "an entry in its last millisecond reports 1 ms")

	_, err = decodeEntry("get", "k", []any{"v", int64(-1)})
	require.ErrorIs(t, err, store.ErrCorrupt)

	for _, bad := range []any{int64(1), []any{"v"}, []any{int64(1), int64(1)}, []any{"v", int64(-2)}} {
		_, err := decodeEntry("get", "k", bad)
		require.Error(t, err, "%#v", bad)
	}

	// A reply the Store does not understand is named by its type: its
	// value may hold a secret, and so may the key.
	_, err = decodeEntry("get", "sk_live_secret", []any{"tok_secret"})
	require.ErrorContains(t, err, "[]interface {}")
	require.ErrorContains(t, err, keyRef("sk_live_secret"))
	require.NotContains(t, err.Error(), "secret")
}

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
