package memstore

import (
	"fmt"
	"runtime"
	"time"

	"github.com/idemkit/idemkit/internal/layout"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// Defaults of a Store built without options.
const (
	// DefaultCapacity is the number of entries a Store holds unless
	// WithCapacity says otherwise.
	DefaultCapacity = 100_000
	// DefaultMaxBytes is the number of bytes (see EntryOverhead) a Store
	// holds unless WithMaxBytes says otherwise.
	DefaultMaxBytes = 256 << 20
)

// EntryOverhead estimates, in bytes, the memory an entry takes beyond its
// key and value (its node and map slot). An entry counts len(key) +
// len(value) + EntryOverhead against WithMaxBytes.
const EntryOverhead = 160

// scopeOverhead is the estimate, in bytes, of what a scope's bookkeeping
// costs beyond its name; a scope holding entries counts len(scope) +
// scopeOverhead against WithMaxBytes.
const scopeOverhead = 160

// maxShards bounds WithShards; more shards than this only cost memory.
const maxShards = 1 << 16

// config holds the settings Options adjust; zero fields are unset.
type config struct {
	capacity      int
	maxBytes      int64
	shards        int
	sweepInterval time.Duration
	onEvict       func(key string)
	onFull        func(key string)
	quota         int
	scopeOf       func(key string) string
}

// Option configures a Store created by New. An Option given an invalid
// argument makes New fail with an error wrapping store.ErrInvalid.
type Option func(*config) error

// WithCapacity sets the maximum number of entries the Store holds, n >= 1
// (default DefaultCapacity). The capacity is split evenly between shards.
func WithCapacity(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithCapacity(%d): capacity must be at least 1", n)
		}
		c.capacity = n
		return nil
	}
}

// WithMaxBytes sets the maximum number of bytes the Store holds, n >= 1
// (default DefaultMaxBytes), counted as the package doc's "Bounds" section
// says. The budget is split evenly between shards; a write of an entry
// larger than a shard's budget fails with ErrTooLarge.
func WithMaxBytes(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithMaxBytes(%d): the byte budget must be at least 1", n)
		}
		c.maxBytes = n
		return nil
	}
}

// WithShards sets the number of independently locked shards, 1 <= n <=
// 65536, instead of the default the package doc's "Bounds" section gives.
// Every shard must have room for an entry of any valid key and, with
// WithScopeQuota, for a whole scope.
func WithShards(n int) Option {
	return func(c *config) error {
		if n < 1 || n > maxShards {
			return fmt.Errorf("WithShards(%d): the shard count must be in [1, %d]", n, maxShards)
		}
		c.shards = n
		return nil
	}
}

// WithSweepInterval starts a janitor goroutine that removes expired
// entries every d, d > 0; Close stops it. Without it no goroutine runs and
// expired entries are reclaimed when touched or when room is needed.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithSweepInterval(%v): the interval must be positive", d)
		}
		c.sweepInterval = d
		return nil
	}
}

// WithOnEvict registers fn, non-nil, to be called with the key of every
// live entry evicted (see Store.Evictions). fn runs synchronously, outside
// any lock, on the goroutine whose write caused the eviction; it may call
// the Store and must be safe for concurrent use. A panic in fn is
// recovered: the write that caused the eviction still succeeds.
func WithOnEvict(fn func(key string)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("WithOnEvict(nil): the callback must not be nil")
		}
		c.onEvict = fn
		return nil
	}
}

// WithOnFull registers fn, non-nil, to be called with the key of every
// write refused with ErrFull (see Store.Refusals). fn runs synchronously,
// outside any lock, on the goroutine whose write was refused; it may call
// the Store and must be safe for concurrent use. A panic in fn is
// recovered: the write still fails with ErrFull.
func WithOnFull(fn func(key string)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("WithOnFull(nil): the callback must not be nil")
		}
		c.onFull = fn
		return nil
	}
}

// WithScopeQuota limits every scope to n >= 1 entries: a write to a scope
// holding n entries first evicts one of that scope's own, never another
// scope's, and fails with ErrFull if all n are claims in progress. scopeOf, non-nil, names a key's scope ("" for none: no quota).
// The package doc's "Scopes" section says how to size a scoped Store.
func WithScopeQuota(n int, scopeOf func(key string) string) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithScopeQuota(%d): the quota must be at least 1", n)
		}
		if scopeOf == nil {
			return fmt.Errorf("WithScopeQuota: the scope function must not be nil")
		}
		c.quota, c.scopeOf = n, scopeOf
		return nil
	}
}

// newConfig applies opts over the defaults and checks that the settings
// fit together. Its errors wrap store.ErrInvalid.
func newConfig(opts []Option) (config, error) {
	var c config
	if err := options.Apply(&c, opts); err != nil {
		return config{}, fmt.Errorf("memstore: %w", err)
	}
	shardsSet := c.shards != 0
	if c.capacity == 0 {
		c.capacity = DefaultCapacity
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxBytes
	}
	if c.scopeOf == nil {
		c.scopeOf = layout.ScopeOf
	}
	if c.quota > c.capacity {
		return config{}, fmt.Errorf("memstore: %w", options.Invalid(fmt.Errorf(
			"WithScopeQuota(%d): scope quota %d exceeds the capacity %d (WithCapacity(%d))", c.quota, c.quota, c.capacity, c.capacity)))
	}
	if c.shards == 0 {
		c.shards = c.defaultShards()
	}
	if err := c.checkShards(); err != nil {
		name := fmt.Sprintf("WithMaxBytes(%d)", c.maxBytes) // the default shard count fits every other setting
		if shardsSet {
			name = fmt.Sprintf("WithShards(%d)", c.shards)
		}
		return config{}, fmt.Errorf("memstore: %w", options.Invalid(fmt.Errorf("%s: %w", name, err)))
	}
	return c, nil
}

// defaultShards returns the shard count New uses when WithShards is not
// given: at least 16 and 4*GOMAXPROCS, lowered until every shard holds a
// scope quota and one entry of the largest size (or there is one shard).
func (c *config) defaultShards() int {
	n := max(16, 4*runtime.GOMAXPROCS(0))
	n = min(n, c.capacity/max(c.quota, 1))
	n = min(n, int(min(c.maxBytes/c.largestEntry(store.MaxValueLen), maxShards)))
	return max(n, 1)
}

// largestEntry returns what an entry with the longest key and a value of
// n bytes counts against the byte budget, with its scope's bookkeeping
// under a scope quota. (Without one, the bookkeeping of a key's scope,
// named by a part of the key, also counts; New does not reserve room for
// it, so that a budget that held an entry of every key still does for
// keys without a scope.)
func (c *config) largestEntry(n int) int64 {
	cost := int64(store.MaxKeyLen+n) + EntryOverhead
	if c.quota > 0 {
		cost += store.MaxKeyLen + scopeOverhead
	}
	return cost
}

// checkShards reports a shard count that leaves a shard unable to hold a
// whole scope or a single entry of any valid key.
func (c *config) checkShards() error {
	if c.shards > c.capacity {
		return fmt.Errorf("%d shards for WithCapacity(%d): every shard needs room for an entry", c.shards, c.capacity)
	}
	if perShard := c.capacity / c.shards; c.quota > perShard {
		return fmt.Errorf("scope quota %d exceeds a shard's capacity %d (%d entries over %d shards): a scope lives in one shard",
			c.quota, perShard, c.capacity, c.shards)
	}
	if perShard, need := c.maxBytes/int64(c.shards), c.largestEntry(0); perShard < need {
		return fmt.Errorf("a shard's byte budget %d (%d bytes over %d shards) is below the %d bytes of an empty entry with the longest key",
			perShard, c.maxBytes, c.shards, need)
	}
	return nil
}

// shareOf returns part i's share of total split evenly over n parts.
func shareOf[T int | int64](total T, n, i int) T {
	share := total / T(n)
	if T(i) < total%T(n) {
		share++
	}
	return share
}
