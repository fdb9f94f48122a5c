package completer

import (
	"errors"
	"fmt"
	"time"
)

// DefaultOlderThan is the threshold Find applies unless WithOlderThan says
// otherwise: a claim whose lease ended is reported once it was made at
// least this long ago.
const DefaultOlderThan = time.Minute

// config holds what the options set.
type config struct {
	olderThan time.Duration
	clock     func() time.Time
	observer  func(Abandoned)
	outcomes  func(Outcome)
	passes    func(Resumed, error)
}

func defaultConfig() config {
	return config{olderThan: DefaultOlderThan, clock: time.Now}
}

// Option configures Find. An Option given an invalid argument makes Find
// fail with an error wrapping idemkit.ErrInvalid.
type Option func(*config) error

// WithOlderThan sets the threshold (default DefaultOlderThan): a claim
// whose lease ended is reported when it was made at least d ago. d must
// not be negative; 0 reports every claim whose lease ended.
func WithOlderThan(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithOlderThan(%v): must not be negative", d)
		}
		c.olderThan = d
		return nil
	}
}

// WithClock sets the clock ages are measured with (default time.Now). Give
// it the clock of an engine built with idemkit.WithClock. It must not be
// nil.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("WithClock(nil): the clock must not be nil")
		}
		c.clock = now
		return nil
	}
}

// WithObserver sets a function Find calls with each abandoned operation
// it reports, oldest first, once the pass has listed them all (not while
// the store lists its keys). It must not be nil.
func WithObserver(fn func(Abandoned)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithObserver(nil): the observer must not be nil")
		}
		c.observer = fn
		return nil
	}
}

// WithOutcomes sets a function Resume calls with the outcome of each
// abandoned operation, as soon as it is known: resumed (Outcome.Resumed,
// with Err nil when its result was recorded) or left as it is (Err says
// why). Count them by kind to export metrics of resumed, failed and
// reported operations. Find does not call it. It must not be nil.
func WithOutcomes(fn func(Outcome)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithOutcomes(nil): the function must not be nil")
		}
		c.outcomes = fn
		return nil
	}
}

// WithPasses sets a function Run calls after each pass with what it did,
// or the error that failed its listing: set a gauge of abandoned
// operations from it (len(Resumed.Abandoned)), count failed passes.
// Find and Resume do not call it (they return the same). It must not be
// nil.
func WithPasses(fn func(Resumed, error)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithPasses(nil): the function must not be nil")
		}
		c.passes = fn
		return nil
	}
}
