package sqlstore

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/internal/options"
)

// Sweeper defaults.
const (
	// DefaultSweepInterval is how often the sweeper looks for expired rows.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is how many expired rows one sweeper statement
	// deletes at most.
	DefaultSweepBatch = 500
)

// config holds the settings Options adjust.
type config struct {
	table         string
	outboxTable   string
	sweepInterval time.Duration
	sweepBatch    int
	sweep         bool
	onSweep       func(deleted int64, err error)
	returning     feature // MySQL: whether DELETE ... RETURNING is known to work
	asyncClaims   bool

	// intervalSet records WithSweepInterval and sweeperOff
	// WithoutSweeper, which contradict each other, as do WithOnSweep
	// (a hook of the sweeper) and WithoutSweeper.
	intervalSet, sweeperOff bool
}

// Option configures a Store created by New. An option given an invalid
// value, a nil option (named by its position counted from 1) and options
// that contradict each other make New fail with an error wrapping
// store.ErrInvalid that names them; New reports every error, not only
// the first. Of two options setting the same thing, the later one
// applies.
type Option func(*config) error

// newConfig applies opts over the defaults through options.Collect, and
// refuses the options that could not take effect together.
func newConfig(opts []Option, postgresDialect bool) (config, error) {
	cfg := config{table: DefaultTable, outboxTable: DefaultOutboxTable, sweepInterval: DefaultSweepInterval, sweepBatch: DefaultSweepBatch, sweep: true}
	errs := options.Collect(&cfg, opts)
	if cfg.sweeperOff && cfg.intervalSet {
		errs = append(errs, fmt.Errorf("WithoutSweeper: contradicts WithSweepInterval(%v): give one of them", cfg.sweepInterval))
	}
	if cfg.sweeperOff && cfg.onSweep != nil {
		errs = append(errs, fmt.Errorf("WithoutSweeper: WithOnSweep's hook would never be called: the hook reports the sweeper's passes"))
	}
	if cfg.outboxTable == cfg.table {
		errs = append(errs, fmt.Errorf("WithOutboxTable(%q): the outbox table is the records' table (WithTable): give them different names", cfg.outboxTable))
	}
	if cfg.asyncClaims && !postgresDialect {
		errs = append(errs, fmt.Errorf("WithAsyncClaims: needs PostgreSQL; MySQL's durability is server-wide (innodb_flush_log_at_trx_commit)"))
	}
	return cfg, options.Invalid(errs...)
}

// WithTable sets the table's name (default DefaultTable): an identifier
// of ASCII letters, digits and underscores, optionally qualified by a
// schema ("idem.records"). It is quoted in every statement.
func WithTable(name string) Option {
	return func(c *config) error {
		if err := tableError(name); err != nil {
			return fmt.Errorf("WithTable(%q): %w", name, err)
		}
		c.table = name
		return nil
	}
}

// WithOutboxTable sets the outbox table's name (default
// DefaultOutboxTable), under the rules of WithTable; see View.Enqueue.
func WithOutboxTable(name string) Option {
	return func(c *config) error {
		if err := tableError(name); err != nil {
			return fmt.Errorf("WithOutboxTable(%q): %w", name, err)
		}
		c.outboxTable = name
		return nil
	}
}

// WithSweepInterval sets how often the sweeper deletes expired rows
// (default DefaultSweepInterval). d must be positive.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithSweepInterval(%v): sweep interval is not positive", d)
		}
		c.sweepInterval, c.intervalSet = d, true
		return nil
	}
}

// WithSweepBatch sets how many expired rows one sweeper statement deletes
// at most (default DefaultSweepBatch), between 1 and 100000. Smaller
// batches hold fewer row locks for less time.
func WithSweepBatch(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 100_000 {
			return fmt.Errorf("WithSweepBatch(%d): sweep batch is outside [1, 100000]", n)
		}
		c.sweepBatch = n
		return nil
	}
}

// WithoutSweeper starts no sweeper: expired rows stay in the table, absent
// for every operation, until a claim of the same key replaces them or the
// application deletes them (Store.Sweep does one bounded pass). Use it
// when another process sweeps the table. WithSweepInterval and WithOnSweep
// set the sweeper: New refuses them with WithoutSweeper.
func WithoutSweeper() Option {
	return func(c *config) error {
		c.sweep, c.sweeperOff = false, true
		return nil
	}
}

// WithOnSweep registers fn to be called after each pass of the sweeper
// with the number of rows it deleted and the error that ended it, if any:
// a hook for metrics and logs. fn runs on the sweeper's goroutine; a slow
// fn delays the next pass.
func WithOnSweep(fn func(deleted int64, err error)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("WithOnSweep(nil): nil sweep hook")
		}
		c.onSweep = fn
		return nil
	}
}

// WithAsyncClaims makes the Store's own claims (SetNX and SetNXBatch on the
// Store, not through a View) commit without waiting for the server to
// flush them to disk: PostgreSQL's synchronous_commit = off, for the
// claim's statement only. Completions, releases and every operation
// through a View keep the server's setting.
//
// A server crash may lose a claim acknowledged shortly before it (a client
// crash or lost connection loses nothing): safe for "claim outside,
// complete inside" when every effect of the work is in the business
// transaction, not for effects outside the database or for Guard windows.
// See the package documentation, section "Asynchronous claims". On MySQL
// New fails with store.ErrInvalid.
func WithAsyncClaims() Option {
	return func(c *config) error {
		c.asyncClaims = true
		return nil
	}
}
