package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// scanCount is the COUNT hint of each SCAN page.
const scanCount = 500

// Scan calls fn with each live key under prefix (the Store's own
// WithPrefix is added to prefix and removed from the keys fn sees) and its
// entry, until fn returns false. It walks SCAN pages (every master of a
// Cluster in turn) and reads each page's values and TTLs with one
// pipelined round trip; a key that changes between its GET and its PTTL
// may show the TTL of its next value. It is for operator tools, not for
// decisions. It implements store.Scanner.
func (s *Store) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	pattern := globEscape(s.key(prefix)) + "*"
	walk := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return s.fail(ctx, "scan", "", err)
			}
			if err := s.scanPage(ctx, c, keys, fn); err != nil {
				return err
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return err
	}
	for _, c := range nodes { // one node at a time: fn is never called concurrently
		if err = walk(ctx, c); err != nil {
			break
		}
	}
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// scanNodes returns the clients to SCAN: every master of a Cluster, every
// shard of a Ring, or the client itself.
func (s *Store) scanNodes(ctx context.Context) ([]redis.Cmdable, error) {
	var mu sync.Mutex
	var nodes []redis.Cmdable
	collect := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, c)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, collect)
	case *redis.Ring:
		err = c.ForEachShard(ctx, collect)
	case redis.Cmdable:
		nodes = append(nodes, c)
	default:
		return nil, errors.New("redisstore: scan: the client cannot SCAN")
	}
	if err != nil {
		return nil, s.fail(ctx, "scan", "", err)
	}
	return nodes, nil
}

// scanPage reads the values and TTLs of one page of keys and hands the
// live ones to fn; it returns errStopScan when fn asked to stop.
func (s *Store) scanPage(ctx context.Context, c redis.Cmdable, keys []string, fn func(string, store.Entry) bool) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && (ctxDone(ctx) != nil || isUnavailable(err)) {
		return s.fail(ctx, "scan", "", err)
	} // per-key errors (gone, not a string) skip that key below
	for i, k := range keys {
		v, gerr := gets[i].Bytes()
		ttl, terr := ttls[i].Result()
		if gerr != nil || terr != nil || ttl <= 0 {
			continue // gone meanwhile, or not one of ours (no TTL)
		}
		ttl = max(ttl.Round(time.Millisecond), time.Millisecond)
		if !fn(strings.TrimPrefix(k, s.prefix), store.Entry{Value: v, TTL: ttl}) {
			return errStopScan
		}
	}
	return nil
}

var errStopScan = errors.New("redisstore: scan stopped")

// globEscape escapes the glob characters of SCAN MATCH in s.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var _ store.Scanner = (*Store)(nil)
