package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

var ctxb = context.Background()

// wrappedClient is a user's own client type, e.g. one adding metrics.
type wrappedClient struct{ *redis.Client }

// TestNewValidation: New rejects, with an error wrapping store.ErrInvalid
// that names the culprit, a nil client (also a typed nil of any client
// type, on which every call would panic) and every invalid option.
func TestNewValidation(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	cases := map[string]struct {
		client redisstore.Client
		opts   []redisstore.Option
		names  string // what the error must name
	}{
		"nil client":            {nil, nil, "nil client"},
		"typed nil client":      {(*redis.Client)(nil), nil, "nil client"},
		"typed nil cluster":     {(*redis.ClusterClient)(nil), nil, "nil client"},
		"typed nil of own type": {(*wrappedClient)(nil), nil, "nil client"},
		"nil option":            {client, []redisstore.Option{nil}, "option 1 is nil"},
		"wait zero replicas":    {client, []redisstore.Option{redisstore.WithWaitReplicas(0, time.Second)}, "WithWaitReplicas"},
		"wait zero timeout":     {client, []redisstore.Option{redisstore.WithWaitReplicas(1, 0)}, "WithWaitReplicas"},
		"wait negative timeout": {client, []redisstore.Option{redisstore.WithWaitReplicas(1, -time.Second)}, "WithWaitReplicas"},
		"wait over ReadTimeout": {client, []redisstore.Option{redisstore.WithWaitReplicas(1, client.Options().ReadTimeout)}, "WithWaitReplicas"},
		"wait on a ring":        {ring, []redisstore.Option{redisstore.WithWaitReplicas(1, time.Second)}, "WithWaitReplicas"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := redisstore.New(c.client, c.opts...)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, c.names)
			require.Nil(t, s)
		})
	}
	s, err := redisstore.New(client, redisstore.WithWaitReplicas(1, time.Second))
	require.NoError(t, err)
	require.NotNil(t, s)
}

func TestNewSendsNothing(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	// A client of a dead server: New must not dial it.
	s, err := redisstore.New(redis.NewClient(srv.Options()), redisstore.WithPrefix("p:"))
	require.NoError(t, err)
	require.NotNil(t, s)
}

func TestPrefixIsApplied(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s, err := redisstore.New(client, redisstore.WithPrefix("app:{tag}:"))
	require.NoError(t, err)
	set, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	require.Equal(t, "v", client.Get(ctxb, "app:{tag}:k").Val())
	require.Equal(t, int64(0), client.Exists(ctxb, "k").Val())

	plain, err := redisstore.New(client)
	require.NoError(t, err)
	_, err = plain.Get(ctxb, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "stores with different prefixes must not share keys")
}

func TestTTLIsKeptInMilliseconds(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s, err := redisstore.New(client)
	require.NoError(t, err)
	_, _, err = s.SetNX(ctxb, "k", []byte("v"), 10*time.Second+time.Microsecond)
	require.NoError(t, err)
	pttl := client.PTTL(ctxb, "k").Val()
	require.Greater(t, pttl, 10*time.Second-time.Second)
	require.LessOrEqual(t, pttl, 10*time.Second+time.Millisecond, "TTL must be rounded up to a millisecond")

	ok, err := s.CompareAndSwap(ctxb, "k", []byte("v"), []byte("w"), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, client.PTTL(ctxb, "k").Val(), 59*time.Minute, "CompareAndSwap must set the new TTL")
}

func TestKeyWithoutExpiryIsCorrupt(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s, err := redisstore.New(client)
	require.NoError(t, err)
	require.NoError(t, client.Set(ctxb, "forever", "v", 0).Err())

	_, err = s.Get(ctxb, "forever")
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.NotContains(t, err.Error(), "forever", "errors name keys by digest only")

	set, _, err := s.SetNX(ctxb, "forever", []byte("x"), time.Minute)
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.False(t, set)
	require.Equal(t, "v", client.Get(ctxb, "forever").Val(), "SetNX must not overwrite it")

	// Consume, which reads no TTL, still works on it.
	v, err := s.Consume(ctxb, "forever")
	require.NoError(t, err)
	require.Equal(t, []byte("v"), v)
}

func TestWrongTypeIsCorrupt(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s, err := redisstore.New(client)
	require.NoError(t, err)
	require.NoError(t, client.HSet(ctxb, "h", "f", "v").Err())

	_, _, err = s.SetNX(ctxb, "h", []byte("x"), time.Minute)
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, err = s.Get(ctxb, "h")
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.NotContains(t, err.Error(), `"h"`, "errors name keys by digest only")
	_, err = s.CompareAndSwap(ctxb, "h", []byte("v"), []byte("w"), time.Minute)
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, err = s.CompareAndDelete(ctxb, "h", []byte("v"))
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, err = s.Consume(ctxb, "h")
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.Equal(t, int64(1), client.Exists(ctxb, "h").Val(), "nothing may delete it")
}

func TestBinaryValues(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s := newStore(t, client)
	v := []byte{0, 1, 2, 0xff, '\r', '\n', 0}
	set, _, err := s.SetNX(ctxb, "k", v, time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	set, e, err := s.SetNX(ctxb, "k", []byte("other"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, v, e.Value)
	ok, err := s.CompareAndDelete(ctxb, "k", v[:len(v)-1])
	require.NoError(t, err)
	require.False(t, ok, "a prefix of the value must not match")
	ok, err = s.CompareAndDelete(ctxb, "k", v)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestReadOnlyReplicaIsUnavailable(t *testing.T) {
	_, replica := redistest.StartReplicated(t)
	s := newStore(t, replica.Client(t))
	_, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.True(t, redis.IsReadOnlyError(err), "the READONLY reply must stay in the chain: %v", err)
	_, err = s.Consume(ctxb, "k")
	require.ErrorIs(t, err, store.ErrUnavailable)
}

func TestOutOfMemoryIsUnavailable(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s := newStore(t, client)
	require.NoError(t, client.ConfigSet(ctxb, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, client.ConfigSet(ctxb, "maxmemory", "1").Err())
	_, _, err := s.SetNX(ctxb, "k", []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.True(t, redis.IsOOMError(err), "the OOM reply must stay in the chain: %v", err)
}

func TestClosedClientIsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(srv.Options())
	s := newStore(t, client)
	require.NoError(t, client.Close())
	_, err := s.Get(ctxb, "k")
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, redis.ErrClosed)
	require.ErrorIs(t, s.Ping(ctxb), store.ErrUnavailable)
}

// TestRaceMixed races SetNX, CompareAndSwap, CompareAndDelete and Consume
// on one key, checking that the key's history is consistent: every
// successful Consume or CompareAndDelete ends exactly one successful
// SetNX's lifetime, during which only the winner's CompareAndSwap works.
// TestCluster runs it on a cluster.
func TestRaceMixed(t *testing.T) {
	client := redistest.Start(t).Client(t)
	forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) { raceMixed(t, client, use) })
}

func raceMixed(t *testing.T, client redisstore.Client, use func(*redisstore.Store)) {
	s := newStore(t, client)
	use(s)
	const workers, rounds = 32, 40
	var sets, ends atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			mine := []byte(fmt.Sprintf("w%d", w))
			for range rounds {
				set, _, err := s.SetNX(ctxb, "k", mine, time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				if !set {
					continue
				}
				sets.Add(1)
				ok, err := s.CompareAndSwap(ctxb, "k", mine, mine, time.Minute)
				assert.NoError(t, err)
				assert.True(t, ok, "the SetNX winner must own the key until it ends it")
				if w%2 == 0 {
					v, err := s.Consume(ctxb, "k")
					assert.NoError(t, err)
					assert.Equal(t, mine, v)
				} else {
					ok, err := s.CompareAndDelete(ctxb, "k", mine)
					assert.NoError(t, err)
					assert.True(t, ok)
				}
				ends.Add(1)
			}
		})
	}
	wg.Wait()
	require.Positive(t, sets.Load())
	require.Equal(t, sets.Load(), ends.Load())
	_, err := s.Get(ctxb, "k")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// The package documentation (and WithWaitReplicas's) states go-redis's
// default ReadTimeout and WriteTimeout: 5 s. This keeps it true when
// go-redis changes.
func TestDocumentedGoRedisTimeouts(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = c.Close() })
	opts := c.Options()
	require.Equal(t, 5*time.Second, opts.ReadTimeout)
	require.Equal(t, 5*time.Second, opts.WriteTimeout)
}

// commandLog is a go-redis hook recording the name and arguments of every
// command sent, pipelined or not.
type commandLog struct {
	mu   sync.Mutex
	cmds [][]any
}

func (h *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.add(c)
		}
		return next(ctx, cmds)
	}
}

func (h *commandLog) add(c redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, c.Args())
}

// take returns the commands sent since the last call.
func (h *commandLog) take() [][]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmds := h.cmds
	h.cmds = nil
	return cmds
}

// names returns the names of the commands sent since the last call.
func (h *commandLog) names() []string {
	var out []string
	for _, args := range h.take() {
		out = append(out, strings.ToLower(fmt.Sprint(args[0])))
	}
	return out
}

// TestPlainCommandsOnRedis7 checks which commands each operation sends
// on the test server (Redis 7.0): SetNX and Get as plain commands in a
// transaction, CompareAndSwap and CompareAndDelete as scripts; and every
// operation as a script when the scripts are forced.
func TestPlainCommandsOnRedis7(t *testing.T) {
	client := redistest.Start(t).Client(t)
	h := &commandLog{}
	client.AddHook(h)
	s := newStore(t, client)
	require.NoError(t, s.LoadScripts(ctxb))
	mustSetNX(t, s, "warm", "v") // detection
	h.names()

	mustSetNX(t, s, "k", "v")
	require.Equal(t, []string{"multi", "set", "pttl", "exec"}, h.names(), "claim")
	set, e, err := s.SetNX(ctxb, "k", []byte("w"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), e.Value)
	require.Greater(t, e.TTL, 59*time.Second)
	require.Equal(t, []string{"multi", "set", "pttl", "exec"}, h.names(), "replay")
	_, err = s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, []string{"multi", "get", "pttl", "exec"}, h.names())
	_, err = s.CompareAndSwap(ctxb, "k", []byte("v"), []byte("w"), time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"evalsha"}, h.names(), "no SET ... IFEQ before Redis 8.4")

	redisstore.UseScripts(s)
	_, _, err = s.SetNX(ctxb, "k", []byte("x"), time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"evalsha"}, h.names())
}

// TestRefusedCommandFallsBackToScript: a server that refuses the plain
// command the Store chose (here SET ... IFEQ and DELEX, which Redis 7.0
// does not know, as after a failover to an older server) gets the script
// instead, in the same call, and the Store detects the server again.
func TestRefusedCommandFallsBackToScript(t *testing.T) {
	client := redistest.Start(t).Client(t)
	h := &commandLog{}
	client.AddHook(h)
	s, err := redisstore.New(client, redisstore.WithPrefix("p:"))
	require.NoError(t, err)
	require.NoError(t, s.LoadScripts(ctxb))
	mustSetNX(t, s, "k", "v")

	redisstore.UseNative(s, true)
	h.take()
	ok, err := s.CompareAndSwap(ctxb, "k", []byte("v"), []byte("w"), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	cmds := h.take()
	require.Len(t, cmds, 2)
	require.Equal(t, []any{"set", "p:k", []byte("w"), "ifeq", []byte("v"), "px", "60000"}, cmds[0])
	require.Equal(t, "evalsha", cmds[1][0])
	require.Equal(t, "w", client.Get(ctxb, "p:k").Val())
	_, _, detected := redisstore.Dialect(s)
	require.False(t, detected, "a refused command makes the Store detect the server again")

	redisstore.UseNative(s, true)
	h.take()
	ok, err = s.CompareAndDelete(ctxb, "k", []byte("w"))
	require.NoError(t, err)
	require.True(t, ok)
	cmds = h.take()
	require.Len(t, cmds, 2)
	require.Equal(t, []any{"delex", "p:k", "ifeq", []byte("w")}, cmds[0])
	require.Equal(t, "evalsha", cmds[1][0])
	require.Zero(t, client.Exists(ctxb, "p:k").Val())
}

// TestInfoRefusedMeansScripts: a server that refuses INFO (an ACL, as
// managed services set) gets the Lua scripts, which every supported
// server runs, rather than failing every operation.
func TestInfoRefusedMeansScripts(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	require.NoError(t, admin.Do(ctxb, "ACL", "SETUSER", "noinfo", "on", ">pw", "+@all", "-info", "~*").Err())
	opts := srv.Options()
	opts.Username, opts.Password = "noinfo", "pw"
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	require.Error(t, client.Info(ctxb, "server").Err(), "the ACL must refuse INFO")

	s := newStore(t, client)
	mustSetNX(t, s, "k", "v")
	setGetNX, ifEq, detected := redisstore.Dialect(s)
	require.True(t, detected)
	require.False(t, setGetNX)
	require.False(t, ifEq)
	e, err := s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("v"), e.Value)
}

// TestPrefixBeforeTheEngineNamespace: WithPrefix("app1:") under an engine
// gives the key names the README and ExampleWithPrefix show,
// app1:idem:i:<scope digest>:<key digest>, never a doubled namespace
// (issue 11 item 14).
func TestPrefixBeforeTheEngineNamespace(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s, err := redisstore.New(client, redisstore.WithPrefix("app1:"))
	require.NoError(t, err)
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	require.NoError(t, err)
	_, err = e.Do(ctxb, "order-1", "", func(context.Context) ([]byte, error) { return []byte("ok"), nil }, idemkit.WithScope("alice"))
	require.NoError(t, err)
	keys, err := client.Keys(ctxb, "*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Regexp(t, `^app1:idem:i:[^:]+:[^:]+$`, keys[0])
	require.NotContains(t, keys[0], "order-1")
	require.NotContains(t, keys[0], "alice")
}
