package boltstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/internal/options"
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
	// WithoutSweeper, which contradict each other; interval is the one
	// WithSweepInterval gave.
	intervalSet, sweeperOff bool
	interval                time.Duration
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
// invalid argument with an error wrapping store.ErrInvalid that names it,
// and a nil option by its position counted from 1; they report every
// error, not only the first. Of two options setting the same thing, the
// later one applies.
type Option func(*config) error

// buildConfig applies opts over the defaults through options.Collect:
// every error is reported, a nil option by its position counted from 1.
// forNew rejects the options only Open applies.
func buildConfig(opts []Option, forNew bool) (config, error) {
	cfg := defaultConfig()
	errs := options.Collect(&cfg, opts)
	if cfg.intervalSet && cfg.sweeperOff {
		errs = append(errs, fmt.Errorf("WithoutSweeper: contradicts WithSweepInterval(%v): give one of them", cfg.interval))
	}
	if forNew {
		for _, name := range cfg.openOnly {
			errs = append(errs, fmt.Errorf("%s applies to Open only: New uses the DB's own settings and its bucket argument", name))
		}
	}
	if err := options.Invalid(errs...); err != nil {
		return config{}, fmt.Errorf("boltstore: %w", err)
	}
	return cfg, nil
}

// WithOpenTimeout sets how long Open waits, d > 0, for the exclusive lock
// on the file before failing with ErrLocked (default DefaultOpenTimeout).
// Open only.
func WithOpenTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithOpenTimeout(%v): the timeout must be positive", d)
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
			return fmt.Errorf("WithSweepInterval(%v): the interval must be positive (WithoutSweeper turns sweeping off)", d)
		}
		c.sweepInterval, c.interval = d, d
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
			return fmt.Errorf("WithSweepBatch(%d): the batch must be in [1, %d]", n, MaxSweepBatch)
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

// checkBucket validates a bucket name given to what. Its error does not
// wrap store.ErrInvalid: the caller does.
func checkBucket(what, name string) error {
	if name == "" || len(name) > bolt.MaxKeySize {
		return fmt.Errorf("%s: bucket name of %d bytes: want 1 to %d", what, len(name), bolt.MaxKeySize)
	}
	return nil
}

// WithClock replaces the wall clock (time.Now) that stamps and checks
// expiry times, for tests. now must be non-nil and safe for concurrent
// use.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("WithClock(nil): the clock must not be nil")
		}
		c.now = now
		return nil
	}
}
