package nearcache

import "fmt"

// Defaults of a near cache.
const (
	// DefaultCapacity is how many keys a near cache remembers.
	DefaultCapacity = 10_000
	// DefaultMaxValue is the largest value, in bytes, a near cache
	// keeps; larger values always go to the store.
	DefaultMaxValue = 64 << 10
)

// Option configures the store New returns. An invalid option makes New
// return an error naming it.
type Option func(*config) error

type config struct {
	capacity int
	maxValue int
}

// WithCapacity sets how many keys the cache remembers (default
// DefaultCapacity); the least recently used are forgotten first. n
// must be at least 1.
func WithCapacity(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithCapacity(%d): must be at least 1", n)
		}
		c.capacity = n
		return nil
	}
}

// WithMaxValue sets the largest value, in bytes, the cache keeps
// (default DefaultMaxValue); larger values always go to the store. n
// must not be negative; 0 caches only empty values.
func WithMaxValue(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("WithMaxValue(%d): must not be negative", n)
		}
		c.maxValue = n
		return nil
	}
}

// Stats are a near cache's counters since it was created.
type Stats struct {
	// Hits counts SetNX and Get calls answered from the cache.
	Hits uint64
	// Misses counts SetNX and Get calls that went to the store.
	Misses uint64
	// Entries is how many keys the cache holds now, expired ones included
	// until they are touched or pushed out.
	Entries int
}
