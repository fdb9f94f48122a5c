package boltstore

import "time"

// Defaults for the options.
const (
	// DefaultOpenTimeout is how long Open waits for bbolt's file lock.
	DefaultOpenTimeout = time.Second
	// DefaultSweepInterval is the time between background sweeps.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is the most expired entries one sweep transaction
	// deletes.
	DefaultSweepBatch = 1000
	// DefaultBucket is the bucket Open keeps entries in.
	DefaultBucket = "idemkit"
	// MaxBatch is the most operations the committer applies in one
	// transaction.
	MaxBatch = 1024
)

// config holds the settings options change.
type config struct {
	openTimeout   time.Duration
	sweepInterval time.Duration
	sweepBatch    int
	noSync        bool
	bucket        string
	now           func() time.Time
}

func defaultConfig() config {
	return config{
		openTimeout:   DefaultOpenTimeout,
		sweepInterval: DefaultSweepInterval,
		sweepBatch:    DefaultSweepBatch,
		bucket:        DefaultBucket,
		now:           time.Now,
	}
}

// Option configures a Store.
type Option func(*config)

// WithOpenTimeout sets how long Open waits for the exclusive lock on the
// file before failing with an error wrapping ErrLocked. The default is
// DefaultOpenTimeout (1s); a non-positive d keeps the default, so Open
// never waits forever. New ignores it.
func WithOpenTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.openTimeout = d
		}
	}
}

// WithSweepInterval sets the time between background sweeps of expired
// entries. The default is DefaultSweepInterval (1m); 0 or less disables
// the background sweeper (Sweep still works, and expired entries are
// still absent to every operation).
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) { c.sweepInterval = d }
}

// WithSweepBatch sets the most expired entries one sweep deletes per
// write transaction, bounding how long a sweep delays other writers. The
// default is DefaultSweepBatch (1000); n <= 0 keeps the default.
func WithSweepBatch(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.sweepBatch = n
		}
	}
}

// WithNoSync makes Open set bbolt's NoSync: commits are not flushed to
// stable storage. Writes become much cheaper, and an acknowledged write
// still survives a crash of the process, but an operating-system crash or
// power failure may lose acknowledged writes and may corrupt the file.
// Off by default. New ignores it (the caller owns the DB's settings).
func WithNoSync() Option {
	return func(c *config) { c.noSync = true }
}

// WithBucket sets the bucket Open keeps entries in, created if missing.
// The default is DefaultBucket ("idemkit"); an empty name keeps the
// default. New takes its bucket as an argument and ignores it.
func WithBucket(name string) Option {
	return func(c *config) {
		if name != "" {
			c.bucket = name
		}
	}
}

// WithClock replaces the wall clock (time.Now) that stamps and checks
// expiry times, for tests. now must be safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}
