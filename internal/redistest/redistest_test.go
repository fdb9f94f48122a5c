package redistest

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(ctx, "k").Val())

	s.Stop()
	_, err := do(s.Addr(), "PING")
	require.Error(t, err, "a stopped server must refuse connections")

	s.Restart()
	reply, err := do(s.Addr(), "PING")
	require.NoError(t, err)
	require.Equal(t, "PONG", reply)
	// No persistence: the restarted server is empty.
	require.Equal(t, int64(0), c.Exists(ctx, "k").Val())
}

func TestStartWithArgs(t *testing.T) {
	s := Start(t, WithArgs("--maxmemory-policy", "volatile-ttl"))
	got, err := s.Client(t).ConfigGet(context.Background(), "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "volatile-ttl", got["maxmemory-policy"])
}

func TestServersUseDistinctPorts(t *testing.T) {
	a, b := Start(t), Start(t)
	require.NotEqual(t, a.Addr(), b.Addr())
	require.True(t, strings.HasPrefix(a.Addr(), "127.0.0.1:"))
}

func TestStartupFailureReportsLog(t *testing.T) {
	ft := runFatal(t, func(tb *fatalTB) { Start(tb, WithArgs("--no-such-directive", "1")) })
	require.Contains(t, ft, "redis-server on 127.0.0.1:")
	require.Contains(t, ft, "no-such-directive", "the failure must show the server's own complaint")
}

func TestMissingBinaryFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	msg := runFatal(t, func(tb *fatalTB) { Start(tb) })
	require.Contains(t, msg, "redis-server not found")
	require.Contains(t, msg, "apt-get install -y redis-server")
}

func TestStartReplicated(t *testing.T) {
	primary, replica := StartReplicated(t)
	ctx := context.Background()
	require.NoError(t, primary.Client(t).Set(ctx, "k", "v", 0).Err())
	n, err := primary.Client(t).Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, "v", replica.Client(t).Get(ctx, "k").Val())
}

func TestStartCluster(t *testing.T) {
	cl := StartCluster(t, 3)
	require.Len(t, cl.Addrs(), 3)
	require.Len(t, cl.Nodes(), 3)
	c := cl.Client(t)
	ctx := context.Background()
	for i := range 30 {
		k := fmt.Sprintf("key-%d", i)
		require.NoError(t, c.Set(ctx, k, k, 0).Err())
		require.Equal(t, k, c.Get(ctx, k).Val())
	}
	var masters atomic.Int32
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		masters.Add(1)
		return n.Ping(ctx).Err()
	}))
	assert.Equal(t, int32(3), masters.Load())
}

func TestStartClusterNeedsThreeMasters(t *testing.T) {
	msg := runFatal(t, func(tb *fatalTB) { StartCluster(tb, 2) })
	require.Contains(t, msg, "at least 3 masters")
}

// fatalTB records the first Fatal message and stops the goroutine, so a
// test can check that a helper fails the test it is given.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// runFatal runs fn on its own goroutine with a fatalTB wrapping t and
// returns the message it failed with; it fails t if fn did not fail.
func runFatal(t *testing.T, fn func(tb *fatalTB)) string {
	t.Helper()
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ft)
	}()
	<-done
	ft.mu.Lock()
	defer ft.mu.Unlock()
	require.NotEmpty(t, ft.msg, "the helper did not fail the test")
	return ft.msg
}

func TestStartMain(t *testing.T) {
	s, stop, err := StartMain()
	require.NoError(t, err)
	reply, err := do(s.Addr(), "PING")
	require.NoError(t, err)
	require.Equal(t, "PONG", reply)
	dir := s.Dir()
	stop()
	_, err = do(s.Addr(), "PING")
	require.Error(t, err, "stop must kill the server")
	require.NoDirExists(t, dir, "stop must remove the server's directory")
}

func TestStartMainReportsFailure(t *testing.T) {
	s, stop, err := StartMain(WithArgs("--no-such-directive", "1"))
	require.Error(t, err)
	require.Nil(t, s)
	require.Nil(t, stop)
	require.Contains(t, err.Error(), "no-such-directive")
}

// A port taken between the free-port probe and redis-server's bind (by
// any process, e.g. an outgoing connection given it as its ephemeral
// port) must not fail the test: Start tries another port.
func TestStartRetriesTakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	var picks int
	pick := func(tb testEnv, bus bool) int {
		picks++
		if picks == 1 {
			return taken
		}
		return freePort(tb, bus)
	}
	s := startFresh(t, pick, false, nil)
	require.NotEqual(t, taken, s.Port())
	require.Equal(t, 2, picks)
	reply, err := do(s.Addr(), "PING")
	require.NoError(t, err)
	require.Equal(t, "PONG", reply)
}

// A server that fails for another reason is not retried.
func TestStartDoesNotRetryOtherFailures(t *testing.T) {
	var picks int
	pick := func(tb testEnv, bus bool) int { picks++; return freePort(tb, bus) }
	msg := runFatal(t, func(tb *fatalTB) { startFresh(tb, pick, false, []string{"--no-such-directive", "1"}) })
	require.Contains(t, msg, "no-such-directive")
	require.Equal(t, 1, picks)
}
