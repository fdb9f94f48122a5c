package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

func ExampleNew() {
	ctx := context.Background()
	// exampleAddr is the address of your Redis, e.g. "localhost:6379".
	rdb := redis.NewClient(&redis.Options{
		Addr:                  exampleAddr,
		ContextTimeoutEnabled: true, // let ctx deadlines bound each call
	})
	defer rdb.Close()

	s, err := redisstore.New(rdb, redisstore.WithPrefix("example:new:"))
	if err != nil {
		log.Fatal(err)
	}

	set, _, err := s.SetNX(ctx, "order-42", []byte("claim-A"), time.Minute)
	fmt.Println(set, err)

	set, existing, err := s.SetNX(ctx, "order-42", []byte("claim-B"), time.Minute)
	fmt.Println(set, string(existing.Value), existing.TTL > 0, err)

	v, err := s.Consume(ctx, "order-42")
	fmt.Println(string(v), err)

	_, err = s.Get(ctx, "order-42")
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// true <nil>
	// false claim-A true <nil>
	// claim-A <nil>
	// true
}

func ExampleStore_CheckEvictionPolicy() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: exampleAddr})
	defer rdb.Close()
	s, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	// At startup: refuse to run on a Redis that may evict claims.
	err = s.CheckEvictionPolicy(ctx)
	switch {
	case errors.Is(err, redisstore.ErrEvictingPolicy):
		log.Fatalf("set maxmemory-policy to noeviction first: %v", err)
	case err != nil:
		// Managed services may disable CONFIG: check their settings.
		log.Fatalf("cannot read the eviction policy: %v", err)
	}
	fmt.Println("eviction policy ok")
	// Output:
	// eviction policy ok
}

func ExampleWithWaitReplicas() {
	ctx := context.Background()
	// A Sentinel-managed primary; WAIT needs a *redis.Client or
	// *redis.ClusterClient.
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "mymaster",
		SentinelAddrs: []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
	})
	defer rdb.Close()

	s, err := redisstore.New(rdb, redisstore.WithWaitReplicas(1, 100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	set, _, err := s.SetNX(ctx, "order-42", []byte("claim-A"), time.Minute)
	if errors.Is(err, redisstore.ErrNotReplicated) {
		// The primary holds the claim (set is true), but no replica
		// confirmed it in time: a failover now could lose it.
		log.Printf("claim set=%v but not replicated: %v", set, err)
	}
}

func ExampleWithPrefix() {
	// Two applications share one Redis Cluster. The engine names its keys
	// under its own namespace ("idem:" by default), so app1's keys are
	// app1:idem:i:<scope>:<key>. Without a hash tag ("{...}") in the
	// prefix, keys spread over the cluster's slots; WithPrefix("{app1}:")
	// would pin all of them to one slot.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
	})
	defer rdb.Close()

	s, err := redisstore.New(rdb, redisstore.WithPrefix("app1:"))
	if err != nil {
		log.Fatal(err)
	}
	_ = s // hand s to the idemkit engine
}
