package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

func TestCheckEvictionPolicy(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	s := newStore(t, client)
	cases := map[string]bool{ // policy: accepted
		"noeviction":      true,
		"volatile-lru":    true,
		"volatile-lfu":    true,
		"volatile-random": true,
		"volatile-ttl":    true,
		"allkeys-lru":     false,
		"allkeys-lfu":     false,
		"allkeys-random":  false,
	}
	for policy, accepted := range cases {
		require.NoError(t, client.ConfigSet(ctxb, "maxmemory-policy", policy).Err())
		err := s.CheckEvictionPolicy(ctxb)
		if accepted {
			require.NoError(t, err, policy)
			continue
		}
		require.ErrorIs(t, err, redisstore.ErrEvictingPolicy, policy)
		require.Contains(t, err.Error(), policy)
	}

	srv.Stop()
	err := s.CheckEvictionPolicy(ctxb)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotErrorIs(t, err, redisstore.ErrEvictingPolicy)
}

// checkEvictionPolicyCluster is run by TestCluster.
func checkEvictionPolicyCluster(t *testing.T, cl *redistest.Cluster) {
	s := newStore(t, cl.Client(t))
	require.NoError(t, s.CheckEvictionPolicy(ctxb))

	node := cl.Nodes()[2]
	admin := node.Client(t)
	require.NoError(t, admin.ConfigSet(ctxb, "maxmemory-policy", "allkeys-lru").Err())
	t.Cleanup(func() { _ = admin.ConfigSet(ctxb, "maxmemory-policy", "noeviction").Err() })
	err := s.CheckEvictionPolicy(ctxb)
	require.ErrorIs(t, err, redisstore.ErrEvictingPolicy)
	require.Contains(t, err.Error(), node.Addr(), "the error must name the offending node")
}

// The example runs against a server it does not own (in real code, the
// reader's Redis): it must leave its configuration as it found it.
func TestExampleCheckEvictionPolicyChangesNothing(t *testing.T) {
	admin := redis.NewClient(&redis.Options{Addr: exampleAddr})
	t.Cleanup(func() { _ = admin.Close() })
	before, err := admin.ConfigGet(ctxb, "maxmemory-policy").Result()
	require.NoError(t, err)
	// An accepted policy other than the one the old example restored.
	require.NoError(t, admin.ConfigSet(ctxb, "maxmemory-policy", "volatile-lru").Err())
	t.Cleanup(func() { _ = admin.ConfigSet(ctxb, "maxmemory-policy", before["maxmemory-policy"]).Err() })

	ExampleStore_CheckEvictionPolicy()

	after, err := admin.ConfigGet(ctxb, "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "volatile-lru", after["maxmemory-policy"])
}
