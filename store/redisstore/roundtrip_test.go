package redisstore_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// roundTrips is a go-redis hook counting what the client sends: one per
// command and one per pipeline, each a network round trip.
type roundTrips struct {
	n atomic.Int64
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*roundTrips)(nil)

// count returns how many round trips f made.
func (h *roundTrips) count(f func()) int64 {
	before := h.n.Load()
	f()
	return h.n.Load() - before
}

// requireOneRoundTripEach runs every operation, twice over: once to warm
// up the script cache (the first use of a script costs EVALSHA, NOSCRIPT,
// EVAL: two round trips), then asserting exactly one round trip each.
func requireOneRoundTripEach(t *testing.T, s *redisstore.Store, h *roundTrips) {
	t.Helper()
	ops := roundTripOps(t, s)
	for _, op := range ops {
		op.run()
	}
	for _, op := range ops {
		require.Equal(t, int64(1), h.count(op.run), "%s", op.name)
	}
}

type roundTripOp struct {
	name string
	run  func()
}

// roundTripOps returns each operation, in both of its outcomes, as a
// function that leaves the store as it found it.
func roundTripOps(t *testing.T, s *redisstore.Store) []roundTripOp {
	v := []byte("v")
	must := func(err error) { require.NoError(t, err) }
	set := func(key string) {
		_, _, err := s.SetNX(ctxb, key, v, time.Minute)
		must(err)
	}
	return []roundTripOp{
		{"SetNX/absent", func() { set("rt:absent") }},
		{"SetNX/present", func() { set("rt:absent") }},
		{"Get/present", func() { _, err := s.Get(ctxb, "rt:absent"); must(err) }},
		{"Get/absent", func() { _, err := s.Get(ctxb, "rt:none"); require.ErrorIs(t, err, store.ErrNotFound) }},
		{"CompareAndSwap", func() { _, err := s.CompareAndSwap(ctxb, "rt:absent", v, v, time.Minute); must(err) }},
		{"CompareAndDelete", func() { _, err := s.CompareAndDelete(ctxb, "rt:absent", v); must(err) }},
		{"CompareAndDelete/absent", func() { _, err := s.CompareAndDelete(ctxb, "rt:absent", v); must(err) }},
		{"SetNX/again", func() { set("rt:absent") }},
		{"Consume", func() { _, err := s.Consume(ctxb, "rt:absent"); must(err) }},
		{"Consume/absent", func() { _, err := s.Consume(ctxb, "rt:absent"); require.ErrorIs(t, err, store.ErrNotFound) }},
	}
}

func TestOneRoundTripStandalone(t *testing.T) {
	client := redistest.Start(t).Client(t)
	h := &roundTrips{}
	client.AddHook(h)
	forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) {
		s := newStore(t, client)
		use(s)
		requireOneRoundTripEach(t, s, h)
	})
}

// oneRoundTripCluster is run by TestCluster.
func oneRoundTripCluster(t *testing.T, cl *redistest.Cluster) {
	client := cl.Client(t) // a client of its own, for its own hook
	h := &roundTrips{}
	client.AddHook(h)
	forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) {
		s := newStore(t, client)
		use(s)
		requireOneRoundTripEach(t, s, h)
	})
}

// forEachDialect runs f once with what the server offers, detected
// ("Detected"), and once with the Lua scripts that Redis 6.2 needs
// ("Scripts"); use applies the choice to a new Store.
func forEachDialect(t *testing.T, f func(t *testing.T, use func(*redisstore.Store))) {
	t.Run("Detected", func(t *testing.T) { f(t, func(*redisstore.Store) {}) })
	t.Run("Scripts", func(t *testing.T) { f(t, redisstore.UseScripts) })
}

// TestDetectionCostsOneRoundTripOnce: the first operation of a Store asks
// the server's version (INFO), once; later ones do not.
func TestDetectionCostsOneRoundTripOnce(t *testing.T) {
	client := redistest.Start(t).Client(t)
	h := &roundTrips{}
	client.AddHook(h)
	s := newStore(t, client)
	set := func() {
		_, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Minute)
		require.NoError(t, err)
	}
	// Dial first: a connection's handshake counts too, and pipelines may
	// have a pool of their own.
	require.NoError(t, client.Ping(ctxb).Err())
	_, err := client.TxPipelined(ctxb, func(p redis.Pipeliner) error { return p.Ping(ctxb).Err() })
	require.NoError(t, err)
	_, _, detected := redisstore.Dialect(s)
	require.False(t, detected)
	require.Equal(t, int64(2), h.count(set), "INFO, then the claim")
	setGetNX, ifEq, detected := redisstore.Dialect(s)
	require.True(t, detected)
	require.True(t, setGetNX, "the test server runs Redis 7.0 or later")
	require.False(t, ifEq, "the test server runs Redis 7.0, without SET ... IFEQ")
	require.Equal(t, int64(1), h.count(set))

	// LoadScripts asks too, so that no operation has to.
	s = newStore(t, client)
	require.NoError(t, s.LoadScripts(ctxb))
	_, _, detected = redisstore.Dialect(s)
	require.True(t, detected)
	require.Equal(t, int64(1), h.count(set))
}

func TestOneRoundTripWithWait(t *testing.T) {
	primary, _ := redistest.StartReplicated(t)
	client := primary.Client(t)
	h := &roundTrips{}
	client.AddHook(h)
	s, err := redisstore.New(client, redisstore.WithWaitReplicas(1, time.Second))
	require.NoError(t, err)
	requireOneRoundTripEach(t, s, h)
}

// TestScriptCacheFallback shows the cost of a missing script: EVALSHA,
// NOSCRIPT, then EVAL, two round trips once; LoadScripts avoids it.
func TestScriptCacheFallback(t *testing.T) {
	client := redistest.Start(t).Client(t)
	h := &roundTrips{}
	client.AddHook(h)
	s := newStore(t, client)
	redisstore.UseScripts(s)
	get := func() {
		_, err := s.Get(ctxb, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	}

	require.NoError(t, client.ScriptFlush(ctxb).Err())
	require.Equal(t, int64(2), h.count(get), "first use after SCRIPT FLUSH")
	require.Equal(t, int64(1), h.count(get), "second use")

	require.NoError(t, client.ScriptFlush(ctxb).Err())
	require.NoError(t, s.LoadScripts(ctxb))
	require.Equal(t, int64(1), h.count(get), "first use after LoadScripts")
}

// TestOneConnectionPerOp counts writes at the socket level: after warm-up,
// a write with WAIT leaves in a single socket write on a single
// connection, EVALSHA and WAIT together.
func TestOneConnectionPerOp(t *testing.T) {
	srv := redistest.Start(t)
	var writes atomic.Int64
	opts := srv.Options()
	opts.PoolSize = 1
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, writes: &writes}, nil
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.WithWaitReplicas(1, 10*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, s.LoadScripts(ctxb))
	// Warm up: pipelines have their own pool, whose first use dials (and
	// writes the connection handshake).
	_, _, err = s.SetNX(ctxb, "warm", []byte("v"), time.Minute)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	before := writes.Load()
	set, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Minute)
	require.True(t, set)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated, "no replica: WAIT returns 0")
	require.Equal(t, int64(1), writes.Load()-before, "EVALSHA and WAIT must leave in one write")
}

// countingConn counts Write calls on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}
