package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

func TestWaitReplicasConfirmed(t *testing.T) {
	primary, replica := redistest.StartReplicated(t)
	client := primary.Client(t)
	s, err := redisstore.New(client, redisstore.WithWaitReplicas(1, time.Second))
	require.NoError(t, err)
	replicaClient := replica.Client(t)

	// Scripts are not cached yet: the first write takes the NOSCRIPT path.
	require.NoError(t, client.ScriptFlush(ctxb).Err())
	mustSetNX(t, s, "k", "v1")
	// WAIT returned 1: the replica has applied the write.
	require.Equal(t, "v1", replicaClient.Get(ctxb, "k").Val())

	ok, err := s.CompareAndSwap(ctxb, "k", []byte("v1"), []byte("v2"), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v2", replicaClient.Get(ctxb, "k").Val())

	ok, err = s.CompareAndDelete(ctxb, "k", []byte("v2"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, replicaClient.Exists(ctxb, "k").Val())

	mustSetNX(t, s, "c", "v")
	v, err := s.Consume(ctxb, "c")
	require.NoError(t, err)
	require.Equal(t, []byte("v"), v)
	require.Zero(t, replicaClient.Exists(ctxb, "c").Val())

	// Operations that write nothing report no error.
	ok, err = s.CompareAndDelete(ctxb, "k", []byte("v2"))
	require.NoError(t, err)
	require.False(t, ok)
	_, err = s.Consume(ctxb, "c")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestWaitReplicasMissing(t *testing.T) {
	primary, replica := redistest.StartReplicated(t)
	client := primary.Client(t)
	s, err := redisstore.New(client, redisstore.WithWaitReplicas(1, 300*time.Millisecond))
	require.NoError(t, err)
	mustSetNX(t, s, "k", "v")
	mustSetNX(t, s, "c", "v")

	replica.Stop()

	set, _, err := s.SetNX(ctxb, "new", []byte("v"), time.Minute)
	requireNotReplicated(t, err)
	require.True(t, set, "the write happened on the primary and SetNX says so")
	require.Equal(t, "v", client.Get(ctxb, "new").Val())

	ok, err := s.CompareAndSwap(ctxb, "k", []byte("v"), []byte("w"), time.Minute)
	requireNotReplicated(t, err)
	require.True(t, ok)

	ok, err = s.CompareAndDelete(ctxb, "k", []byte("w"))
	requireNotReplicated(t, err)
	require.True(t, ok)
	require.Zero(t, client.Exists(ctxb, "k").Val())

	v, err := s.Consume(ctxb, "c")
	requireNotReplicated(t, err)
	require.Equal(t, []byte("v"), v)

	// The error names the key by digest only (issue 11 item 9).
	_, _, err = s.SetNX(ctxb, "order-SECRET-7788", []byte("v"), time.Minute)
	requireNotReplicated(t, err)
	require.NotContains(t, err.Error(), "SECRET", "ErrNotReplicated names the raw key")

	// A write that changed nothing is not an error.
	set, e, err := s.SetNX(ctxb, "new", []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), e.Value)

	// Once the replica is back, writes are confirmed again.
	replica.Restart()
	redistest.WaitReplicaUp(t, primary, replica)
	mustSetNX(t, s, "after", "v")
}

// waitReplicasCluster is run by TestCluster. Three masters and no
// replicas: WAIT 1 can never be satisfied; that each write reports it, and
// happened, shows that WAIT reaches the master that holds each key.
func waitReplicasCluster(t *testing.T, client *redis.ClusterClient) {
	require.NoError(t, client.ScriptFlush(ctxb).Err())
	s := newStore(t, client, redisstore.WithWaitReplicas(1, 50*time.Millisecond))
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		set, _, err := s.SetNX(ctxb, key, []byte("v"), time.Minute)
		requireNotReplicated(t, err)
		require.True(t, set)
		e, err := s.Get(ctxb, key)
		require.NoError(t, err)
		require.Equal(t, []byte("v"), e.Value)
		v, err := s.Consume(ctxb, key)
		requireNotReplicated(t, err)
		require.Equal(t, []byte("v"), v)
	}
}

func requireNotReplicated(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "applied on the primary")
}

// waitAfterSlotMoved is run by TestCluster. It reassigns the (empty) slot
// of a key to another master behind the client's back: a write with WAIT,
// sent on the old master's connection, gets MOVED and fails with
// store.ErrUnavailable having written nothing; the client then reloads
// its slot map and later writes reach the new master.
func waitAfterSlotMoved(t *testing.T, cl *redistest.Cluster) {
	client := cl.Client(t)
	s, err := redisstore.New(client, redisstore.WithPrefix("mv:"), redisstore.WithWaitReplicas(1, 10*time.Millisecond))
	require.NoError(t, err)
	mustNotReplicate := func(key string) {
		set, _, err := s.SetNX(ctxb, key, []byte("v"), time.Minute)
		requireNotReplicated(t, err)
		require.True(t, set)
	}
	mustNotReplicate("warm-up") // loads the slot map and the scripts

	key, full := "moved", "mv:moved" // as the caller and as Redis see it
	target := moveSlot(t, cl, client, full)

	_, _, err = s.SetNX(ctxb, key, []byte("v"), time.Minute)
	require.ErrorIs(t, err, store.ErrUnavailable)
	_, moved := redis.IsMovedError(err)
	require.True(t, moved, "want MOVED in the chain, got %v", err)
	require.NotErrorIs(t, err, redisstore.ErrNotReplicated, "nothing was written")

	require.Eventually(t, func() bool {
		set, _, err := s.SetNX(ctxb, key, []byte("v"), time.Minute)
		return set && errors.Is(err, redisstore.ErrNotReplicated)
	}, recoverBound, 20*time.Millisecond)
	require.Equal(t, "v", target.Client(t).Get(ctxb, full).Val(), "the key must be on the new master")
}

// txAfterSlotMoved is run by TestCluster. Without WAIT, SetNX and Get run
// as MULTI/EXEC transactions through the ClusterClient, which follows a
// MOVED reply: a slot reassigned behind the client's back costs no error.
func txAfterSlotMoved(t *testing.T, cl *redistest.Cluster) {
	client := cl.Client(t)
	s, err := redisstore.New(client, redisstore.WithPrefix("tx:"))
	require.NoError(t, err)
	mustSetNX(t, s, "warm-up", "v") // loads the slot map, detects the dialect
	target := moveSlot(t, cl, client, "tx:moved")

	mustSetNX(t, s, "moved", "v")
	set, e, err := s.SetNX(ctxb, "moved", []byte("w"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), e.Value)
	require.Equal(t, "v", target.Client(t).Get(ctxb, "tx:moved").Val(), "the key must be on the new master")
}

// moveSlot reassigns the (empty) slot of the Redis key full to another
// master, on every node, and returns that master.
func moveSlot(t *testing.T, cl *redistest.Cluster, client *redis.ClusterClient, full string) *redistest.Server {
	slot := client.ClusterKeySlot(ctxb, full).Val()
	owner, err := client.MasterForKey(ctxb, full)
	require.NoError(t, err)
	var target *redistest.Server
	for _, n := range cl.Nodes() {
		if n.Addr() != owner.Options().Addr {
			target = n
			break
		}
	}
	targetID, err := target.Client(t).ClusterMyID(ctxb).Result()
	require.NoError(t, err)
	for _, n := range cl.Nodes() {
		require.NoError(t, n.Client(t).Do(ctxb, "CLUSTER", "SETSLOT", slot, "NODE", targetID).Err(), n.Addr())
	}
	return target
}
