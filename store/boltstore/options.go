package boltstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// Defaults and limits of the options.
const (
	// DefaultOpenTimeout is how long Open waits for bbolt's file lock.
	DefaultOpenTimeout = time.Second
	// DefaultSweepInterval is the time between background sweeps.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is the most expired entries one sweep transaction
	// deletes.
	DefaultSweepBatch = 1000
	// MaxSweepBatch is the largest batch WithSweepBatch accepts.
	MaxSweepBatch = 1 << 20
	// DefaultBucket is the bucket Open keeps entries in.
	DefaultBucket = "idemkit"
	// MaxBatch is the most operations the committer applies in one
	// transaction.
	MaxBatch = 1024
)

// config holds the settings options change.
type config struct {
	openTimeout   time.Duration
	sweepInterval time.Duration // 0: no background sweeper
	sweepBatch    int
	noSync        bool
	bucket        string
	now           func() time.Time

	// openOnly names the options given that only Open applies.
	openOnly []string
	// intervalSet and sweeperOff record WithSweepInterval and
	// WithoutSweeper, which contradict each other.
	intervalSet, sweeperOff bool
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

// Option configures a Store. Open and New reject an option given an
// invalid argument with an error wrapping store.ErrInvalid that names it.
// Of two options setting the same thing, the later one applies.
type Option func(*config) error

// invalid returns the error of an invalid option or argument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("boltstore: %w: "+format, append([]any{store.ErrInvalid}, args...)...)
}

// buildConfig applies opts over the defaults. forNew rejects the options
// only Open applies.
func buildConfig(opts []Option, forNew bool) (config, error) {
	cfg := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return config{}, invalid("nil Option at position %d", i)
		}
		if err := o(&cfg); err != nil {
			return config{}, err
		}
	}
	if cfg.intervalSet && cfg.sweeperOff {
		return config{}, invalid("WithoutSweeper contradicts WithSweepInterval: give one of them")
	}
	if forNew && len(cfg.openOnly) > 0 {
		return config{}, invalid("%s applies to Open only: New uses the DB's own settings and its bucket argument", cfg.openOnly[0])
	}
	return cfg, nil
}

// WithOpenTimeout sets how long Open waits, d > 0, for the exclusive lock
// on the file before failing with ErrLocked (default DefaultOpenTimeout).
// Open only.
func WithOpenTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("WithOpenTimeout(%v): the timeout must be positive", d)
		}
		c.openTimeout = d
		c.openOnly = append(c.openOnly, "WithOpenTimeout")
		return nil
	}
}

// WithSweepInterval sets the time, d > 0, between background sweeps of
// expired entries (default DefaultSweepInterval).
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("WithSweepInterval(%v): the interval must be positive (WithoutSweeper turns sweeping off)", d)
		}
		c.sweepInterval = d
		c.intervalSet = true
		return nil
	}
}

// WithoutSweeper starts no background sweeper. Expired entries stay
// absent to every operation; Sweep reclaims their space on demand.
func WithoutSweeper() Option {
	return func(c *config) error {
		c.sweepInterval = 0
		c.sweeperOff = true
		return nil
	}
}

// WithSweepBatch sets the most expired entries, 1 <= n <= MaxSweepBatch,
// one sweep deletes per write transaction (default DefaultSweepBatch).
func WithSweepBatch(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxSweepBatch {
			return invalid("WithSweepBatch(%d): the batch must be in [1, %d]", n, MaxSweepBatch)
		}
		c.sweepBatch = n
		return nil
	}
}

// WithNoSync makes Open set bbolt's NoSync: commits are not flushed to
// stable storage (see the package documentation's "Durability"). Open
// only.
func WithNoSync() Option {
	return func(c *config) error {
		c.noSync = true
		c.openOnly = append(c.openOnly, "WithNoSync")
		return nil
	}
}

// WithBucket sets the bucket Open keeps entries in, created if missing: a
// non-empty name of at most bbolt's MaxKeySize bytes (default
// DefaultBucket). Open only; New takes its bucket as an argument.
func WithBucket(name string) Option {
	return func(c *config) error {
		if err := checkBucket("WithBucket", name); err != nil {
			return err
		}
		c.bucket = name
		c.openOnly = append(c.openOnly, "WithBucket")
		return nil
	}
}

// checkBucket validates a bucket name given to what.
func checkBucket(what, name string) error {
	if name == "" || len(name) > bolt.MaxKeySize {
		return invalid("%s: bucket name of %d bytes: want 1 to %d", what, len(name), bolt.MaxKeySize)
	}
	return nil
}

// WithClock replaces the wall clock (time.Now) that stamps and checks
// expiry times, for tests. now must be non-nil and safe for concurrent
// use.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return invalid("WithClock(nil): the clock must not be nil")
		}
		c.now = now
		return nil
	}
}
