package sqlstore

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
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
	sweepInterval time.Duration
	sweepBatch    int
	sweep         bool
	onSweep       func(deleted int64, err error)
	returning     feature // MySQL: whether DELETE ... RETURNING is known to work
	asyncClaims   bool
}

// Option configures a Store created by New. An option given an invalid
// value makes New fail with an error wrapping store.ErrInvalid.
type Option func(*config) error

// WithTable sets the table's name (default DefaultTable): an identifier
// of ASCII letters, digits and underscores, optionally qualified by a
// schema ("idem.records"). It is quoted in every statement.
func WithTable(name string) Option {
	return func(c *config) error {
		if err := checkTable(name); err != nil {
			return err
		}
		c.table = name
		return nil
	}
}

// WithSweepInterval sets how often the sweeper deletes expired rows
// (default DefaultSweepInterval). d must be positive.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: sweep interval %v is not positive", store.ErrInvalid, d)
		}
		c.sweepInterval = d
		return nil
	}
}

// WithSweepBatch sets how many expired rows one sweeper statement deletes
// at most (default DefaultSweepBatch), between 1 and 100000. Smaller
// batches hold fewer row locks for less time.
func WithSweepBatch(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 100_000 {
			return fmt.Errorf("%w: sweep batch %d is outside [1, 100000]", store.ErrInvalid, n)
		}
		c.sweepBatch = n
		return nil
	}
}

// WithoutSweeper starts no sweeper: expired rows stay in the table, absent
// for every operation, until a claim of the same key replaces them or the
// application deletes them (Store.Sweep does one bounded pass). Use it
// when another process sweeps the table.
func WithoutSweeper() Option {
	return func(c *config) error {
		c.sweep = false
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
			return fmt.Errorf("%w: nil sweep hook", store.ErrInvalid)
		}
		c.onSweep = fn
		return nil
	}
}

// WithAsyncClaims makes the Store's own claims (SetNX and SetNXBatch on the
// Store, not through a View) commit without waiting for the server to
// flush them to disk: PostgreSQL's synchronous_commit = off, for the
// claim's statement only. A claim then costs about what a plain INSERT
// costs when its commit does not wait: in the mode "claim outside,
// complete inside" the business transaction's commit is the only one that
// waits, instead of one of two.
//
// What it gives up: a claim acknowledged less than about three times the
// server's wal_writer_delay (200ms by default) before a server crash may
// be lost with it. Nothing is lost by a client crash or a lost connection,
// and the order of commits is kept: a later commit that waits (the
// business transaction's) flushes every earlier claim with it, so a
// completed record never outlives a crash that lost its claim. That makes
// the option safe for the mode "claim outside, complete inside" when every
// effect of the work is in the business transaction: after a crash that
// lost the claim, the owner's completion finds no record of its own and
// its transaction rolls back, and a retry runs the work once. It is not
// safe when the work has effects outside the database (a payment, an
// e-mail) or for dedup windows (idemkit's Guard): there a lost claim lets
// a duplicate run after the server restarts. That is why it is an option
// and not the default.
//
// Completions, releases and every operation through a View keep the
// server's setting. On MySQL, where durability is a server-wide setting
// (innodb_flush_log_at_trx_commit), New fails with store.ErrInvalid.
func WithAsyncClaims() Option {
	return func(c *config) error {
		c.asyncClaims = true
		return nil
	}
}
