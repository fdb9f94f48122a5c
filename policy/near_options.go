package policy

// Defaults of a NearCache.
const (
	// DefaultNearCapacity is how many keys a NearCache remembers.
	DefaultNearCapacity = 10_000
	// DefaultNearMaxValue is the largest value, in bytes, a NearCache
	// keeps; larger values always go to the store.
	DefaultNearMaxValue = 64 << 10
)

// NearOption configures a NearCache.
type NearOption func(*nearConfig)

type nearConfig struct {
	settled  func(value []byte) bool
	capacity int
	maxValue int
}

// WithSettled sets the predicate that says which values can be cached: a
// value for which settled returns true must not change before it expires,
// by anyone. The default, nil, caches nothing, so a NearCache without this
// option only passes calls through. With the idemkit engine, pass
// idemkit.Settled, which accepts completed results and Guard claims kept
// until expiry.
func WithSettled(settled func(value []byte) bool) NearOption {
	return func(c *nearConfig) { c.settled = settled }
}

// WithNearCapacity sets how many keys the cache remembers (default
// DefaultNearCapacity); the least recently used are forgotten first. Values
// below 1 select the default.
func WithNearCapacity(n int) NearOption {
	return func(c *nearConfig) {
		if n >= 1 {
			c.capacity = n
		}
	}
}

// WithNearMaxValue sets the largest value, in bytes, the cache keeps
// (default DefaultNearMaxValue). Values below 0 select the default; 0
// caches only empty values.
func WithNearMaxValue(n int) NearOption {
	return func(c *nearConfig) {
		if n >= 0 {
			c.maxValue = n
		}
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
