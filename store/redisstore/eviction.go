package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrEvictingPolicy reports a Redis whose maxmemory-policy may evict keys
// that have no TTL as well as those that have one: an allkeys-* policy.
// See CheckEvictionPolicy.
var ErrEvictingPolicy = errors.New("redisstore: maxmemory-policy may evict any key")

// CheckEvictionPolicy reads maxmemory-policy (CONFIG GET) from the server,
// or from every master of a cluster, and returns an error wrapping
// ErrEvictingPolicy, naming the node and policy, when it is not
// noeviction or a volatile-* policy. Call it once at startup.
//
// Under memory pressure an evicted claim is a lost claim: a duplicate
// request then runs twice. noeviction is the recommended policy: Redis
// then refuses writes (OOM, reported as store.ErrUnavailable) instead of
// dropping keys. volatile-* policies pass the check because other
// applications' keys without a TTL are safe from them, but note that every
// key a Store writes carries a TTL, so volatile-* policies can still
// evict idemkit's keys; allkeys-* policies are rejected.
//
// Managed services that disable CONFIG return an error that does not
// wrap ErrEvictingPolicy; check the policy in the service's settings.
func (s *Store) CheckEvictionPolicy(ctx context.Context) error {
	err := s.forEachNode(ctx, checkPolicy)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrEvictingPolicy):
		return err
	}
	return s.fail(ctx, "check eviction policy", "", err)
}

// checkPolicy checks the maxmemory-policy of one node.
func checkPolicy(ctx context.Context, c Client, addr string) error {
	cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return err
	}
	policy, ok := cfg["maxmemory-policy"]
	if !ok {
		return fmt.Errorf("redisstore: CONFIG GET maxmemory-policy returned nothing (%s)", nodeName(addr))
	}
	if policy == "noeviction" || strings.HasPrefix(policy, "volatile-") {
		return nil
	}
	return fmt.Errorf("%w: %s has maxmemory-policy %q; use noeviction (recommended) or a volatile-* policy",
		ErrEvictingPolicy, nodeName(addr), policy)
}

// nodeName describes a node for error messages.
func nodeName(addr string) string {
	if addr == "" {
		return "the server"
	}
	return "node " + addr
}
