package policy

// Defaults of a NearCache.
const (
	// DefaultNearCapacity is how many keys a NearCache remembers.
	DefaultNearCapacity = 10_000
	// DefaultNearMaxValue is the largest value, in bytes, a NearCache
	// keeps; larger values always go to the store.
	DefaultNearMaxValue = 64 << 10
)

// NearOption configures a NearCache. An invalid option makes NewNearCache
// return an error naming it.
type NearOption func(*nearConfig) error

type nearConfig struct {
	capacity int
	maxValue int
}

// WithNearCapacity sets how many keys the cache remembers (default
// DefaultNearCapacity); the least recently used are forgotten first. n
// must be at least 1.
func WithNearCapacity(n int) NearOption {
	return func(c *nearConfig) error {
		if n < 1 {
			return invalid("WithNearCapacity(%d): must be at least 1", n)
		}
		c.capacity = n
		return nil
	}
}

// WithNearMaxValue sets the largest value, in bytes, the cache keeps
// (default DefaultNearMaxValue); larger values always go to the store. n
// must not be negative; 0 caches only empty values.
func WithNearMaxValue(n int) NearOption {
	return func(c *nearConfig) error {
		if n < 0 {
			return invalid("WithNearMaxValue(%d): must not be negative", n)
		}
		c.maxValue = n
		return nil
	}
}

// NearStats are a NearCache's counters since it was created.
type NearStats struct {
	// Hits counts SetNX and Get calls answered from the cache.
	Hits uint64
	// Misses counts SetNX and Get calls that went to the store.
	Misses uint64
	// Entries is how many keys the cache holds now, expired ones included
	// until they are touched or pushed out.
	Entries int
}
