package nearcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
)

// cache is the store New returns, before storewrap gives it the optional
// interfaces of the store it wraps.
type cache struct {
	s        store.Store
	closer   storewrap.OnceCloser
	settled  func([]byte) bool
	maxValue int
	shards   []nearShard
	mask     uint64
	seed     maphash.Seed
	hits     atomic.Uint64
	misses   atomic.Uint64
}

var (
	_ store.Store  = (*cache)(nil)
	_ store.Closer = (*cache)(nil)
	_ store.Pinger = (*cache)(nil)
)

type nearShard struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, nearEntry]
	gen uint64 // bumped by every forget, so a racing fill is dropped
	_   [40]byte
}

type nearEntry struct {
	value   []byte
	expires time.Time
}

// New returns a store.Store in front of s that remembers, inside this
// process, keys it has seen held with a settled value, and answers repeats
// of them without a round trip. It only ever answers "held", never
// "free", and never past the TTL the store reported; see the package
// documentation. StatsOf reports its counters.
//
// settled says which values can be cached: a value for which it returns
// true must not change before it expires, by anyone. With the idemkit
// engine pass idemkit.Settled.
//
// The store owns s: Close closes it. It is safe for concurrent use. A nil
// s or settled, or an invalid option, is an error wrapping
// store.ErrInvalid that names every problem.
func New(s store.Store, settled func(value []byte) bool, opts ...Option) (store.Store, error) {
	var errs []error
	if s == nil {
		errs = append(errs, errors.New("nil store"))
	}
	if settled == nil {
		errs = append(errs, errors.New("nil settled predicate"))
	}
	c := config{capacity: DefaultCapacity, maxValue: DefaultMaxValue}
	errs = append(errs, options.Collect(&c, opts)...)
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("nearcache: %w", err)
	}
	n := nearShards(c.capacity)
	nc := &cache{
		s:        s,
		closer:   storewrap.OnceCloser{S: s},
		settled:  settled,
		maxValue: c.maxValue,
		shards:   make([]nearShard, n),
		mask:     uint64(n - 1),
		seed:     maphash.MakeSeed(),
	}
	per := (c.capacity + n - 1) / n
	for i := range nc.shards {
		nc.shards[i].lru, _ = simplelru.NewLRU[string, nearEntry](per, nil) // per >= 1: no error
	}
	return nc.wrap(), nil
}

// StatsOf returns the counters of s, a store New returned, and false for
// any other store (one New's result was wrapped in, among them).
func StatsOf(s store.Store) (Stats, bool) {
	nc, ok := storewrap.Core(s).(*cache)
	if !ok {
		return Stats{}, false
	}
	return nc.Stats(), true
}

// nearShards picks a power of two at least 16 and at least four times
// GOMAXPROCS, but no more than capacity.
func nearShards(capacity int) int {
	n := 1 << bits.Len(uint(max(16, 4*runtime.GOMAXPROCS(0))-1))
	for n > 1 && n > capacity {
		n /= 2
	}
	return n
}

func (nc *cache) shard(key string) *nearShard {
	return &nc.shards[maphash.String(nc.seed, key)&nc.mask]
}

// lookup returns the cached entry for key, with its remaining TTL, and the
// shard's generation for a later fill.
func (nc *cache) lookup(key string) (store.Entry, uint64, bool) {
	sh := nc.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.lru.Get(key)
	if !ok {
		return store.Entry{}, sh.gen, false
	}
	ttl := time.Until(e.expires).Truncate(time.Millisecond)
	if ttl <= 0 {
		sh.lru.Remove(key)
		return store.Entry{}, sh.gen, false
	}
	return store.Entry{Value: bytes.Clone(e.value), TTL: ttl}, sh.gen, true
}

// fill caches value for key until start+ttl if it is settled and no forget
// ran on the shard since the lookup that saw generation gen.
func (nc *cache) fill(key string, value []byte, ttl time.Duration, start time.Time, gen uint64) {
	if len(value) > nc.maxValue || !nc.settled(value) {
		return
	}
	e := nearEntry{value: bytes.Clone(value), expires: start.Add(ttl)}
	sh := nc.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen == gen {
		sh.lru.Add(key, e)
	}
}

// forget drops key and voids fills racing with it.
func (nc *cache) forget(key string) {
	sh := nc.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.gen++
	sh.lru.Remove(key)
}

// SetNX implements store.Store. A key cached as held answers false with the
// cached entry and no store call.
func (nc *cache) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := store.CheckSet(key, value, ttl); err != nil {
		return false, store.Entry{}, err
	}
	e, gen, ok := nc.lookup(key)
	if ok {
		nc.hits.Add(1)
		return false, e, nil
	}
	nc.misses.Add(1)
	start := time.Now()
	set, e, err := nc.s.SetNX(ctx, key, value, ttl)
	switch {
	case err != nil:
	case set:
		nc.fill(key, value, store.RoundTTL(ttl), start, gen)
	default:
		nc.fill(key, e.Value, e.TTL, start, gen)
	}
	return set, e, err
}

// Get implements store.Store. A key cached as held is answered from the
// cache.
func (nc *cache) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, err
	}
	e, gen, ok := nc.lookup(key)
	if ok {
		nc.hits.Add(1)
		return e, nil
	}
	nc.misses.Add(1)
	start := time.Now()
	e, err := nc.s.Get(ctx, key)
	if err == nil {
		nc.fill(key, e.Value, e.TTL, start, gen)
	}
	return e, err
}

// CompareAndSwap implements store.Store. It always calls the store.
func (nc *cache) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	nc.forget(key)
	defer nc.forget(key)
	return nc.s.CompareAndSwap(ctx, key, old, new, ttl)
}

// CompareAndDelete implements store.Store. It always calls the store.
func (nc *cache) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	nc.forget(key)
	defer nc.forget(key)
	return nc.s.CompareAndDelete(ctx, key, old)
}

// Consume implements store.Store. It always calls the store.
func (nc *cache) Consume(ctx context.Context, key string) ([]byte, error) {
	nc.forget(key)
	defer nc.forget(key)
	return nc.s.Consume(ctx, key)
}

// Stats returns the cache's counters.
func (nc *cache) Stats() Stats {
	st := Stats{Hits: nc.hits.Load(), Misses: nc.misses.Load()}
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.Lock()
		st.Entries += sh.lru.Len()
		sh.mu.Unlock()
	}
	return st
}

// Close drops every cached key and closes the wrapped store; it is offered
// when that store is a store.Closer. Only the first call closes the store; later calls return
// its result.
func (nc *cache) Close() error {
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.Lock()
		sh.gen++
		sh.lru.Purge()
		sh.mu.Unlock()
	}
	return nc.closer.Close()
}

// Ping forwards to the wrapped store; it is offered when that store is a
// store.Pinger.
func (nc *cache) Ping(ctx context.Context) error {
	if p, ok := nc.s.(store.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}
