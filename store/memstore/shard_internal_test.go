package memstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/layout"
)

// layoutInProgress is the rule that puts a node among the claims.
var layoutInProgress = layout.InProgress

// checkShard verifies the bookkeeping of sh: every node is in exactly the
// lists its fields say, the lists are consistently linked both ways, the
// counts and bytes agree with the nodes, no scope exceeds the quota or
// stays without entries, and the heap ranks the scopes by their evictable
// entries.
func checkShard(t *testing.T, sh *shard) {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	require.LessOrEqual(t, len(sh.nodes), sh.maxEntries)
	var claimBytes int64
	claims := 0
	for _, n := range sh.nodes {
		require.Equal(t, n.seg == claimed, layoutInProgress(n.value), "node %q segment against its value", n.key)
		if n.seg == claimed {
			claimBytes += entryCost(n.key, n.value)
			claims++
		}
	}
	require.Equal(t, claims, sh.claims, "claims count drifted")
	require.Equal(t, claimBytes, sh.claimBytes, "claim bytes drifted")

	var bytes, claimScopeBytes int64
	for _, n := range sh.nodes {
		bytes += entryCost(n.key, n.value)
		require.NotNil(t, n.scope, "node %q without a scope", n.key)
		require.Same(t, n.scope, sh.scopes[n.scope.name], "node %q points at a dropped scope", n.key)
	}
	inScopes := 0
	require.Len(t, sh.ranked, len(sh.scopes), "scopes missing from the heap")
	for name, sc := range sh.scopes {
		require.Equal(t, name, sc.name)
		require.Equal(t, scopeCost(name), sc.cost)
		if name != "" {
			require.Positive(t, sc.segs.len(), "empty scope %q kept", name)
		}
		if sh.quota > 0 && name != "" {
			require.LessOrEqual(t, sc.segs.len(), sh.quota, "scope %q over its quota", name)
		}
		require.Same(t, sc, sh.ranked[sc.rank], "scope %q not at its rank", name)
		if sc.rank > 0 {
			require.GreaterOrEqual(t, sh.ranked[(sc.rank-1)/2].segs.evictable(), sc.segs.evictable(), "heap order broken at %q", name)
		}
		bytes += sc.cost
		if sc.segs[claimed].len > 0 {
			claimScopeBytes += sc.cost
		}
		for seg := range sc.segs {
			for _, n := range walk(t, &sc.segs[seg]) {
				require.Same(t, sc, n.scope)
				require.Same(t, n, sh.nodes[n.key], "node %q not in the map", n.key)
				require.Equal(t, seg, int(n.seg), "node %q in the wrong scope segment", n.key)
				inScopes++
			}
		}
	}
	require.Equal(t, len(sh.nodes), inScopes, "nodes missing from their scope lists")
	require.Equal(t, claimScopeBytes, sh.claimScopeBytes, "claim scope bytes drifted")
	require.Equal(t, bytes, sh.bytes, "counted bytes drifted")
	require.LessOrEqual(t, sh.bytes, sh.maxBytes)
}

// walk returns l's nodes from most to least recently used, checking the
// links both ways and the length.
func walk(t *testing.T, l *list) []*node {
	t.Helper()
	var nodes []*node
	var prev *node
	for n := l.head; n != nil; n = n.links.next {
		require.Same(t, prev, n.links.prev, "broken back link")
		nodes = append(nodes, n)
		prev = n
		require.LessOrEqual(t, len(nodes), l.len, "list longer than its length")
	}
	require.Same(t, prev, l.tail)
	require.Len(t, nodes, l.len)
	return nodes
}

// TestShardBookkeepingUnderRace mixes every operation, short TTLs,
// evictions by count, bytes and quota, and a janitor, from 64 goroutines
// over few keys, then checks every shard's bookkeeping.
func TestShardBookkeepingUnderRace(t *testing.T) {
	scopeOf := func(key string) string { return key[:1] }
	s, err := New(WithCapacity(200), WithShards(4), WithMaxBytes(4*8<<10), WithScopeQuota(20, scopeOf),
		WithSweepInterval(time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range 300 {
				key := string(rune('a'+(w+i)%6)) + strconv.Itoa(i%50)
				value := make([]byte, (w*i)%700)
				if i%3 == 0 && len(value) > layout.RecordHeaderLen {
					value[0], value[1] = layout.RecordVersion, layout.StateInProgress // a claim in progress
				}
				ttl := time.Duration(1+i%5) * time.Millisecond
				if _, _, err := s.SetNX(ctx, key, value, ttl); err != nil && !errors.Is(err, ErrFull) {
					assert.ErrorIs(t, err, ErrTooLarge)
				}
				switch i % 4 {
				case 0:
					_, _ = s.CompareAndSwap(ctx, key, value, make([]byte, len(value)+200), time.Hour)
					_, _ = s.CompareAndSwap(ctx, key, value, value, time.Hour) // a heartbeat
				case 1:
					_, _ = s.Get(ctx, key)
				case 2:
					_, _ = s.Consume(ctx, key)
				case 3:
					_, _ = s.CompareAndDelete(ctx, key, value)
				}
			}
		})
	}
	wg.Wait()
	for i := range s.shards {
		checkShard(t, &s.shards[i])
	}
	assert.Positive(t, s.Evictions())
	assert.Positive(t, s.Refusals())
}

// TestMakeRoomPrefersExpiredThenProbation drives one shard directly:
// expired entries go first (at the LRU end, or found by a due scan), then
// the least recently used unprotected entry, then a protected one, never
// the excepted node.
func TestMakeRoomPrefersExpiredThenProbation(t *testing.T) {
	var sh shard
	sh.init(100, 1<<20, 0)
	add := func(key string, expires int64, protect bool) *node {
		_, err := sh.insert(key, "", []byte{}, expires, 0, nil)
		require.NoError(t, err)
		n := sh.nodes[key]
		if protect {
			_, err = sh.rewrite(n, []byte{}, expires, 0, nil)
			require.NoError(t, err)
		}
		return n
	}
	add("p-old", 100, true)
	add("live", 100, false)
	add("short", 10, false)                  // most recently used, expires first
	sh.pacer.since, sh.pacer.every = 0, 1000 // no scan due

	evicted, ok := sh.makeRoom(nil, 20, nil)
	require.True(t, ok)
	assert.Equal(t, []string{"live"}, evicted, "without a scan, the live LRU probation entry goes")

	sh.pacer.since = sh.pacer.every // a scan is due: it finds short
	evicted, ok = sh.makeRoom(nil, 20, nil)
	require.True(t, ok)
	assert.Empty(t, evicted)
	assert.Nil(t, sh.nodes["short"])

	keep := add("p-new", 100, true)
	sh.touch(sh.nodes["p-old"]) // p-new becomes the protected LRU, but is excepted
	evicted, ok = sh.makeRoom(keep, 20, nil)
	require.True(t, ok)
	assert.Equal(t, []string{"p-old"}, evicted)
	_, ok = sh.makeRoom(keep, 20, nil)
	assert.False(t, ok, "only the excepted node is left")
	checkShard(t, &sh)
}
