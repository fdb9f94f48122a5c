package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestSetNXValueIsOneCommand checks what SetNXValue sends on the test
// server (Redis 7.0): SET ... NX PX ... GET alone, whether it stores or
// not, with the TTL in milliseconds; and SetNX's script when the scripts
// are forced.
func TestSetNXValueIsOneCommand(t *testing.T) {
	client := redistest.Start(t).Client(t)
	h := &commandLog{}
	client.AddHook(h)
	s, err := redisstore.New(client, redisstore.WithPrefix("p:"))
	require.NoError(t, err)
	require.NoError(t, s.LoadScripts(ctxb))
	h.take()

	set, existing, err := s.SetNXValue(ctxb, "k", []byte("v"), 1500*time.Microsecond)
	require.NoError(t, err)
	require.True(t, set)
	require.Nil(t, existing)
	require.Equal(t, [][]any{{"set", "p:k", []byte("v"), "nx", "px", "2", "get"}}, h.take(), "claim")
	// The claim's 2 ms may be over already on a loaded machine: write the
	// record again with a TTL that outlives the rest of the test.
	require.NoError(t, client.Set(ctxb, "p:k", "v", time.Minute).Err())
	h.take()

	set, existing, err = s.SetNXValue(ctxb, "k", []byte("w"), time.Hour)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), existing)
	require.Equal(t, [][]any{{"set", "p:k", []byte("w"), "nx", "px", "3600000", "get"}}, h.take(), "replay")
	require.LessOrEqual(t, client.PTTL(ctxb, "p:k").Val(), time.Minute, "a replay must not touch the TTL")
	h.take()

	redisstore.UseScripts(s)
	set, existing, err = s.SetNXValue(ctxb, "k", []byte("w"), time.Hour)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), existing)
	require.Equal(t, []string{"evalsha"}, h.names(), "Redis 6.2 runs SetNX's script")
}

// TestSetNXValueOneRoundTrip: SetNXValue, in both outcomes, is one round
// trip with each dialect, also with WithWaitReplicas.
func TestSetNXValueOneRoundTrip(t *testing.T) {
	primary, _ := redistest.StartReplicated(t)
	client := primary.Client(t)
	h := &roundTrips{}
	client.AddHook(h)
	run := func(t *testing.T, s *redisstore.Store) {
		require.NoError(t, s.LoadScripts(ctxb))
		// Warm up: the pipeline of a waiting store may dial a connection
		// of its own (HELLO, CLIENT SETINFO), once.
		_, _, err := s.SetNXValue(ctxb, "warm", []byte("v"), time.Minute)
		require.NoError(t, err)
		for _, key := range []string{"absent", "absent"} {
			n := h.count(func() {
				_, _, err := s.SetNXValue(ctxb, key, []byte("v"), time.Minute)
				require.NoError(t, err)
			})
			require.Equal(t, int64(1), n, "SetNXValue(%s)", key)
		}
	}
	forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) {
		t.Run("Plain", func(t *testing.T) {
			s := newStore(t, client)
			use(s)
			run(t, s)
		})
		t.Run("Wait", func(t *testing.T) {
			s := newStore(t, client, redisstore.WithWaitReplicas(1, time.Second))
			use(s)
			run(t, s)
		})
	})
}

// TestSetNXValueWaitReplicas: with WithWaitReplicas, SetNXValue keeps
// SetNX's guarantee. A stored value is confirmed by the replica before it
// returns; once the replica is gone, a stored value is reported as set
// together with ErrNotReplicated (the write happened on the primary),
// and a claim that found the key present is no error.
func TestSetNXValueWaitReplicas(t *testing.T) {
	primary, replica := redistest.StartReplicated(t)
	client := primary.Client(t)
	h := &commandLog{}
	client.AddHook(h)
	s, err := redisstore.New(client, redisstore.WithWaitReplicas(1, 300*time.Millisecond))
	require.NoError(t, err)
	replicaClient := replica.Client(t)
	_, _, err = s.SetNXValue(ctxb, "warm", []byte("v"), time.Minute) // detection
	require.NoError(t, err)
	h.take()

	set, _, err := s.SetNXValue(ctxb, "k", []byte("v1"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	require.Equal(t, "v1", replicaClient.Get(ctxb, "k").Val(), "WAIT returned 1: the replica has the write")
	require.Equal(t, []string{"set", "wait"}, h.names())

	replica.Stop()

	set, _, err = s.SetNXValue(ctxb, "new", []byte("v"), time.Minute)
	requireNotReplicated(t, err)
	require.True(t, set, "the write happened on the primary and SetNXValue says so")
	require.Equal(t, "v", client.Get(ctxb, "new").Val())

	set, existing, err := s.SetNXValue(ctxb, "new", []byte("x"), time.Minute)
	require.NoError(t, err, "a claim that wrote nothing is not an error")
	require.False(t, set)
	require.Equal(t, []byte("v"), existing)
}

// TestSetNXValueForeignKeys: a key someone else wrote without an expiry
// is returned as it is (SetNXValue reads no TTL) and left alone; a key
// holding a non-string is corrupt, and its error names it by digest only.
func TestSetNXValueForeignKeys(t *testing.T) {
	client := redistest.Start(t).Client(t)
	s, err := redisstore.New(client)
	require.NoError(t, err)
	require.NoError(t, client.Set(ctxb, "forever", "v", 0).Err())
	require.NoError(t, client.HSet(ctxb, "h", "f", "v").Err())

	set, existing, err := s.SetNXValue(ctxb, "forever", []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), existing)
	require.Equal(t, time.Duration(-1), client.PTTL(ctxb, "forever").Val(), "nothing may change it")

	_, _, err = s.SetNXValue(ctxb, "h", []byte("x"), time.Minute)
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.NotContains(t, err.Error(), `"h"`, "errors name keys by digest only")
	require.Equal(t, "hash", client.Type(ctxb, "h").Val())
}

// TestSetNXValueClosedClientIsUnavailable: a client that cannot reach
// Redis reports store.ErrUnavailable, as every operation does.
func TestSetNXValueClosedClientIsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(srv.Options())
	s, err := redisstore.New(client)
	require.NoError(t, err)
	_, _, err = s.SetNXValue(ctxb, "warm", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.NoError(t, client.Close())
	_, _, err = s.SetNXValue(ctxb, "k", []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable)
}
