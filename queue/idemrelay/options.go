package idemrelay

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/internal/options"
)

// Defaults of a Relay.
const (
	// DefaultBatchSize is how many rows one batch claims.
	DefaultBatchSize = 100
	// MaxBatchSize is the largest batch: below JetStream's default limit
	// of pending asynchronous publishes (4,000).
	MaxBatchSize = 1000
	// DefaultPollInterval is how long Run waits after a batch that was
	// not full before it looks again.
	DefaultPollInterval = time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the back-off after a
	// failure: Run's wait after a batch that published nothing, and a
	// failed row's delay before its next attempt, doubling from the
	// minimum with each consecutive failure up to the maximum.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultPublishTimeout bounds the wait for a batch's confirms.
	DefaultPublishTimeout = 30 * time.Second
)

// Option configures New. New refuses a nil option (by its position,
// counted from 1), an invalid value and an option given twice, naming
// each, in one error wrapping idemkit.ErrInvalid.
type Option func(*config) error

type config struct {
	batch                  int
	poll                   time.Duration
	minBackoff, maxBackoff time.Duration
	publishTimeout         time.Duration
	observer               func(Report)
	// afterPublish runs between the confirms and Finish (tests only:
	// export_test.go sets it).
	afterPublish func(confirmed []string)
	set          map[string]bool
}

func newConfig(opts []Option) (config, error) {
	cfg := config{
		batch: DefaultBatchSize, poll: DefaultPollInterval,
		minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff,
		publishTimeout: DefaultPublishTimeout, set: map[string]bool{},
	}
	return cfg, options.Apply(&cfg, opts)
}

// once refuses a second option of the same name, which would silently
// replace the first.
func (c *config) once(name string) error {
	if c.set[name] {
		return fmt.Errorf("%s given twice", name)
	}
	c.set[name] = true
	return nil
}

// WithBatchSize sets how many rows one batch claims and publishes (default
// DefaultBatchSize), 1 to MaxBatchSize. A batch holds its rows locked,
// and one connection, until the broker confirmed them.
func WithBatchSize(n int) Option {
	return func(c *config) error {
		if err := c.once("WithBatchSize"); err != nil {
			return err
		}
		if n < 1 || n > MaxBatchSize {
			return fmt.Errorf("WithBatchSize(%d): outside [1, %d]", n, MaxBatchSize)
		}
		c.batch = n
		return nil
	}
}

// WithPollInterval sets how long Run waits, after a batch that was not
// full, before it claims again (default DefaultPollInterval); d must be
// positive.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if err := c.once("WithPollInterval"); err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("WithPollInterval(%v): not positive", d)
		}
		c.poll = d
		return nil
	}
}

// WithBackoff sets the back-off after failures (defaults DefaultMinBackoff
// and DefaultMaxBackoff): it starts at lo and doubles with each
// consecutive failure up to hi. 0 < lo <= hi.
func WithBackoff(lo, hi time.Duration) Option {
	return func(c *config) error {
		if err := c.once("WithBackoff"); err != nil {
			return err
		}
		if lo <= 0 || hi < lo {
			return fmt.Errorf("WithBackoff(%v, %v): want 0 < lo <= hi", lo, hi)
		}
		c.minBackoff, c.maxBackoff = lo, hi
		return nil
	}
}

// WithPublishTimeout bounds how long a batch waits for the broker's
// confirms (default DefaultPublishTimeout); a message not confirmed in
// time counts as failed and its row stays. d must be positive.
func WithPublishTimeout(d time.Duration) Option {
	return func(c *config) error {
		if err := c.once("WithPublishTimeout"); err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("WithPublishTimeout(%v): not positive", d)
		}
		c.publishTimeout = d
		return nil
	}
}

// WithObserver hands fn the Report of every batch, for metrics and logs
// (an OpenTelemetry bridge reads its fields). fn runs on the relay's
// goroutine, after the batch ended: a slow fn delays the next batch.
func WithObserver(fn func(Report)) Option {
	return func(c *config) error {
		if err := c.once("WithObserver"); err != nil {
			return err
		}
		if fn == nil {
			return fmt.Errorf("WithObserver(nil): nil observer")
		}
		c.observer = fn
		return nil
	}
}

// backoff is the wait after n consecutive failures (n >= 1): lo doubled
// n-1 times, at most hi.
func backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}
