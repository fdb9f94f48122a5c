package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// Bounds of the fault tests. opTimeout is the caller's deadline for one
// operation; returnBound is how long past it an operation may take to
// return before the test calls it hung. recoverBound bounds the polling
// for recovery after a restart.
const (
	opTimeout    = 500 * time.Millisecond
	returnBound  = 5 * time.Second
	recoverBound = 15 * time.Second
)

// namedOp is one operation of a Store as a function of a context.
type namedOp struct {
	name string
	run  func(ctx context.Context) error
}

// storeOps returns every operation of s on the key "fault:k", in an order
// in which each succeeds when the key starts out holding "v".
func storeOps(s *redisstore.Store) []namedOp {
	v := []byte("v")
	return []namedOp{
		{"Ping", s.Ping},
		{"SetNX", func(ctx context.Context) error {
			_, _, err := s.SetNX(ctx, "fault:k", v, time.Minute)
			return err
		}},
		{"Get", func(ctx context.Context) error {
			_, err := s.Get(ctx, "fault:k")
			return err
		}},
		{"CompareAndSwap", func(ctx context.Context) error {
			return wantTrue(s.CompareAndSwap(ctx, "fault:k", v, v, time.Minute))
		}},
		{"CompareAndDelete", func(ctx context.Context) error {
			return wantTrue(s.CompareAndDelete(ctx, "fault:k", v))
		}},
		{"Consume", func(ctx context.Context) error {
			if _, _, err := s.SetNX(ctx, "fault:k", v, time.Minute); err != nil {
				return err
			}
			_, err := s.Consume(ctx, "fault:k")
			return err
		}},
	}
}

// wantTrue turns a false result into an error.
func wantTrue(ok bool, err error) error {
	if err == nil && !ok {
		return errors.New("returned false")
	}
	return err
}

// requireUnavailable runs op under a context with opTimeout and checks
// that it fails with store.ErrUnavailable, and returns before
// opTimeout+returnBound (checked with a context, not a clock reading).
func requireUnavailable(t *testing.T, name string, op func(ctx context.Context) error) {
	t.Helper()
	bound, cancelBound := context.WithTimeout(ctxb, opTimeout+returnBound)
	defer cancelBound()
	ctx, cancel := context.WithTimeout(bound, opTimeout)
	defer cancel()
	err := op(ctx)
	require.ErrorIs(t, err, store.ErrUnavailable, "%s", name)
	require.NoError(t, bound.Err(), "%s did not return within its deadline plus %v", name, returnBound)
}

// requireRecovers polls op with bounded retries until it succeeds.
func requireRecovers(t *testing.T, name string, op func(ctx context.Context) error) {
	t.Helper()
	var last error
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(ctxb, opTimeout)
		defer cancel()
		last = op(ctx)
		return last == nil
	}, recoverBound, 20*time.Millisecond, "%s did not recover: last error %v", name, last)
}

// ctxClient returns a client of srv that honours context deadlines.
func ctxClient(t *testing.T, srv *redistest.Server) *redis.Client {
	opts := srv.Options()
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestServerStoppedAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, ctxClient(t, srv))
	require.NoError(t, s.Ping(ctxb))
	mustSetNX(t, s, "fault:k", "v")

	srv.Stop()
	for _, op := range storeOps(s) {
		requireUnavailable(t, op.name, op.run)
	}

	srv.Restart()
	requireRecovers(t, "Ping", s.Ping)
	// The same Store, not a new one, works again: the restarted server is
	// empty, so write the key back and run every operation.
	mustSetNX(t, s, "fault:k", "v")
	for _, op := range storeOps(s) {
		require.NoError(t, op.run(ctxb), "%s after restart", op.name)
	}
}

// TestUnresponsiveServerMeetsDeadline points a store at a server that
// accepts connections and never answers: every operation must give up at
// the caller's deadline with an error wrapping both
// context.DeadlineExceeded and store.ErrUnavailable.
func TestUnresponsiveServerMeetsDeadline(t *testing.T) {
	addr := blackhole(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c)
	for _, op := range storeOps(s) {
		bound, cancelBound := context.WithTimeout(ctxb, opTimeout+returnBound)
		ctx, cancel := context.WithTimeout(bound, opTimeout)
		err := op.run(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s", op.name)
		require.ErrorIs(t, err, store.ErrUnavailable, "%s", op.name)
		require.NoError(t, bound.Err(), "%s did not return within its deadline plus %v", op.name, returnBound)
		cancelBound()
	}
}

// blackhole listens on a loopback port, accepts connections, reads and
// discards what they send and never replies. It stops at the test's end.
func blackhole(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, conn) })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

func TestClusterNodeStoppedAndRestarted(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	opts := cl.Options()
	opts.ContextTimeoutEnabled = true
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client)
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctxb))

	// Find a key served by the node that will be stopped.
	victim := cl.Nodes()[1]
	key := keyOnNode(t, client, victim.Addr())
	mustSetNX(t, s, key, "v")

	victim.Stop()
	requireUnavailable(t, "Get", func(ctx context.Context) error {
		_, err := s.Get(ctx, key)
		return err
	})
	requireUnavailable(t, "SetNX", func(ctx context.Context) error {
		_, _, err := s.SetNX(ctx, key, []byte("v"), time.Minute)
		return err
	})
	requireUnavailable(t, "Ping", s.Ping)

	victim.Restart()
	requireRecovers(t, "SetNX", func(ctx context.Context) error {
		_, _, err := s.SetNX(ctx, key, []byte("v"), time.Minute)
		return err
	})
	e, err := s.Get(ctxb, key)
	require.NoError(t, err)
	require.Equal(t, []byte("v"), e.Value)
}

// keyOnNode returns a key whose slot the master at addr serves.
func keyOnNode(t *testing.T, c *redis.ClusterClient, addr string) string {
	t.Helper()
	for i := range 10000 {
		key := fmt.Sprintf("fault:%d", i)
		node, err := c.MasterForKey(ctxb, key)
		require.NoError(t, err)
		if node.Options().Addr == addr {
			return key
		}
	}
	t.Fatalf("no key found on %s", addr)
	return ""
}

// mustSetNX stores value under an absent key.
func mustSetNX(t *testing.T, s *redisstore.Store, key, value string) {
	t.Helper()
	set, _, err := s.SetNX(ctxb, key, []byte(value), time.Minute)
	require.NoError(t, err)
	require.True(t, set, "SetNX(%q)", key)
}

// TestDeadlineWithoutRetriesWrapsDeadlineExceeded uses the client settings
// the README recommends (ContextTimeoutEnabled, MaxRetries -1): the socket
// deadline is the caller's deadline and may fire before ctx's own timer,
// and the error must still wrap context.DeadlineExceeded.
func TestDeadlineWithoutRetriesWrapsDeadlineExceeded(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: blackhole(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c)
	for i := range 50 {
		ctx, cancel := context.WithTimeout(ctxb, 2*time.Millisecond)
		_, err := s.Get(ctx, "k")
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "attempt %d", i)
		require.ErrorIs(t, err, store.ErrUnavailable, "attempt %d", i)
	}
}
