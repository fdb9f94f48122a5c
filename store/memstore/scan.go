package memstore

import (
	"context"
	"slices"
	"strings"

	"github.com/idemkit/idemkit/store"
)

// scanned is one entry Scan copied out of a shard.
type scanned struct {
	key string
	ent store.Entry
}

// Scan calls fn with each live key that starts with prefix and a copy of
// its entry, shard by shard, until fn returns false. Each shard is copied
// under its lock and fn runs without it, so fn may use the store. It does
// not mark entries as recently used. It implements store.Scanner.
func (s *Store) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	if err := s.begin(ctx, "Scan", nil); err != nil {
		return err
	}
	for i := range s.shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := s.scanShard(&s.shards[i], prefix)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !fn(e.key, e.ent) {
				return nil
			}
		}
	}
	return nil
}

func (s *Store) scanShard(sh *shard, prefix string) ([]scanned, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return nil, errClosed("Scan")
	}
	now := s.now()
	var out []scanned
	for key, n := range sh.nodes {
		if strings.HasPrefix(key, prefix) && n.live(now) {
			out = append(out, scanned{key: key, ent: store.Entry{Value: slices.Clone(n.value), TTL: n.remaining(now)}})
		}
	}
	return out, nil
}

var _ store.Scanner = (*Store)(nil)
