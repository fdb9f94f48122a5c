package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/idemkit/idemkit/store"
)

// SetNXBatch claims every item as SetNX would, in one critical section:
// the shards of all the items are locked together (in index order, so
// concurrent batches cannot deadlock) while the items are claimed in
// input order, so a key named twice is set by its first occurrence. An
// item too large for its shard fails the whole call with ErrTooLarge and
// the batch's own inserts are undone (entries they evicted stay evicted).
// It implements store.Batcher.
func (s *Store) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := s.begin(ctx, "SetNXBatch", store.CheckBatch(items)); err != nil {
		return nil, err
	}
	out := make([]store.BatchResult, len(items))
	if len(items) == 0 {
		return out, nil
	}
	idx := make([]int, len(items))
	scopes := make([]string, len(items))
	for i, it := range items {
		idx[i], scopes[i] = s.shardIndex(it.Key, true)
	}
	locked := slices.Compact(slices.Sorted(slices.Values(idx)))
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}
	var evicted []string
	var err error
	failed := -1 // the item whose insert failed
	if s.closed.Load() {
		err = errClosed("SetNXBatch")
	} else {
		evicted, failed, err = s.claimAll(items, idx, scopes, out)
	}
	for _, i := range locked {
		s.shards[i].mu.Unlock()
	}
	s.evicted(evicted)
	if failed >= 0 {
		return nil, s.writeFailed(fmt.Sprintf("SetNXBatch: item %d", failed), items[failed].Key, err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimAll claims the items under their shards' locks, undoing its own
// inserts when one fails; it then returns the index of the item that
// failed, and otherwise -1.
func (s *Store) claimAll(items []store.BatchItem, idx []int, scopes []string, out []store.BatchResult) ([]string, int, error) {
	now := s.now()
	var evicted []string
	for i, it := range items {
		sh := &s.shards[idx[i]]
		if n := sh.get(it.Key, now); n != nil {
			out[i].Existing = store.Entry{Value: slices.Clone(n.value), TTL: n.remaining(now)}
			continue
		}
		if slices.Contains(evicted, it.Key) {
			// An earlier item of this batch evicted the key: if the batch
			// named it before, this occurrence answers as that one found
			// it, so that the key is claimed by its first occurrence only.
			if j := slices.IndexFunc(items[:i], func(e store.BatchItem) bool { return e.Key == it.Key }); j >= 0 {
				out[i].Existing = firstOccurrence(items[j], out[j], now)
				continue
			}
		}
		var err error
		evicted, err = sh.insert(it.Key, scopes[i], slices.Clone(it.Value), expiry(now, it.TTL), now, evicted)
		if err != nil {
			for j := range i {
				if out[j].Set {
					if n := s.shards[idx[j]].peek(items[j].Key, now); n != nil {
						s.shards[idx[j]].drop(n)
					}
				}
			}
			return evicted, i, err
		}
		out[i].Set = true
	}
	return evicted, -1, nil
}

// firstOccurrence is the entry a later occurrence of item's key in a batch
// reports: the value item set, with its TTL at now, or the entry item
// found.
func firstOccurrence(item store.BatchItem, res store.BatchResult, now int64) store.Entry {
	if !res.Set {
		return store.Entry{Value: slices.Clone(res.Existing.Value), TTL: res.Existing.TTL}
	}
	n := node{expires: expiry(now, item.TTL)}
	return store.Entry{Value: slices.Clone(item.Value), TTL: n.remaining(now)}
}

var _ store.Batcher = (*Store)(nil)
