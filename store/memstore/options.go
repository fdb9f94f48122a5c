package memstore

import (
	"math/bits"
	"runtime"
	"time"
)

// DefaultCapacity is the number of entries a Store holds unless
// WithCapacity says otherwise.
const DefaultCapacity = 100_000

// maxShards bounds WithShards; more shards than this only cost memory.
const maxShards = 1 << 16

// config holds the settings Options adjust.
type config struct {
	capacity      int
	shards        int
	sweepInterval time.Duration
	onEvict       func(key string)
}

// Option configures a Store created by New.
type Option func(*config)

// WithCapacity sets the maximum number of entries the Store holds, across
// all shards. The capacity is split evenly between shards, so a shard can
// fill (and evict) while others still have room. Values below 1 select
// DefaultCapacity.
func WithCapacity(n int) Option {
	return func(c *config) { c.capacity = n }
}

// WithShards sets the number of independently locked shards. It is rounded
// up to a power of two, capped at 65536, and lowered if needed so that
// every shard holds at least one entry. Values below 1 select the default:
// the smallest power of two that is at least 16 and at least four times
// GOMAXPROCS at the time New is called.
func WithShards(n int) Option {
	return func(c *config) { c.shards = n }
}

// WithSweepInterval starts a janitor goroutine that removes expired
// entries every d. Close stops it. A d of 0 or less (the default) starts no
// goroutine; expired entries are then reclaimed when an operation touches
// them or when a full shard needs room.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) { c.sweepInterval = d }
}

// WithOnEvict registers fn to be called with the key of every live entry
// pushed out to make room for a new one (see Store.Evictions). fn is called
// synchronously, outside any lock, on the goroutine whose SetNX caused the
// eviction; it may call the Store, and it must be safe for concurrent use.
// It is not called for expired entries or for deletes.
func WithOnEvict(fn func(key string)) Option {
	return func(c *config) { c.onEvict = fn }
}

// newConfig applies opts over the defaults and clamps the results.
func newConfig(opts []Option) config {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	if c.capacity < 1 {
		c.capacity = DefaultCapacity
	}
	if c.shards < 1 {
		c.shards = max(16, 4*runtime.GOMAXPROCS(0))
	}
	c.shards = ceilPow2(min(c.shards, maxShards))
	for c.shards > c.capacity {
		c.shards /= 2
	}
	return c
}

// ceilPow2 returns the smallest power of two >= n, for n >= 1.
func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}
