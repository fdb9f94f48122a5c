package nearcache

import (
	"context"
	"time"

	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
)

// wrap gives nc the optional interfaces of the store it wraps.
func (nc *cache) wrap() store.Store {
	return storewrap.Build(nc, storewrap.Of(nc.s), storewrap.Methods{
		Close:      nc.Close,
		Ping:       nc.Ping,
		SetNXValue: nc.setNXValue,
		SetNXBatch: nc.setNXBatch,
		Scan:       nc.scan,
	})
}

// setNXValue implements store.SetNXValuer, offered when the wrapped store
// is one. It is SetNX without the TTL: a cached key is answered from the
// cache, and a miss claims through the store's SetNX, whose TTL the cache
// needs to fill, so a claim costs what it cost before.
func (nc *cache) setNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	set, e, err := nc.SetNX(ctx, key, value, ttl)
	return set, e.Value, err
}

// setNXBatch implements store.Batcher, offered when the wrapped store is
// one: cached keys are answered from the cache, the others go to the
// store in one SetNXBatch and fill the cache as SetNX does.
func (nc *cache) setNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	res := make([]store.BatchResult, len(items))
	var miss []store.BatchItem
	var at []int
	var gens []uint64
	for i, it := range items {
		e, gen, ok := nc.lookup(it.Key)
		if ok {
			nc.hits.Add(1)
			res[i] = store.BatchResult{Existing: e}
			continue
		}
		nc.misses.Add(1)
		miss, at, gens = append(miss, it), append(at, i), append(gens, gen)
	}
	if len(miss) == 0 {
		return res, nil
	}
	start := time.Now()
	got, err := nc.s.(store.Batcher).SetNXBatch(ctx, miss)
	if err != nil {
		return nil, err
	}
	for j, r := range got {
		it := miss[j]
		if r.Set {
			nc.fill(it.Key, it.Value, store.RoundTTL(it.TTL), start, gens[j])
		} else {
			nc.fill(it.Key, r.Existing.Value, r.Existing.TTL, start, gens[j])
		}
		res[at[j]] = r
	}
	return res, nil
}

// scan implements store.Scanner, offered when the wrapped store is one: it
// lists the store's keys.
func (nc *cache) scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	return nc.s.(store.Scanner).Scan(ctx, prefix, fn)
}
