package tiered

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of a tiered store.
const (
	// DefaultFailureThreshold is how many consecutive primary failures open
	// the breaker.
	DefaultFailureThreshold = 5
	// DefaultCoolDown is how long the breaker stays open before it lets a
	// probe through to the primary.
	DefaultCoolDown = time.Second
	// DefaultJournalSize is how many fallback keys a tiered store remembers for
	// copy-forward.
	DefaultJournalSize = 100_000
	// DefaultCopyTimeout bounds each store call of the background
	// copy-forward.
	DefaultCopyTimeout = time.Second
)

// Option configures the store New returns. An invalid option makes New
// return an error naming it.
type Option func(*config) error

type config struct {
	threshold   int
	coolDown    time.Duration
	journalSize int
	copyTimeout time.Duration
	observer    func(Event)
}

func defaultConfig() config {
	return config{
		threshold:   DefaultFailureThreshold,
		coolDown:    DefaultCoolDown,
		journalSize: DefaultJournalSize,
		copyTimeout: DefaultCopyTimeout,
	}
}

// WithFailureThreshold sets how many consecutive primary failures (errors
// wrapping store.ErrUnavailable) open the breaker (default
// DefaultFailureThreshold). n must be at least 1.
func WithFailureThreshold(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithFailureThreshold(%d): must be at least 1", n)
		}
		c.threshold = n
		return nil
	}
}

// WithCoolDown sets how long the breaker stays open before one probe goes
// to the primary (default DefaultCoolDown). d must be positive.
func WithCoolDown(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithCoolDown(%v): must be positive", d)
		}
		c.coolDown = d
		return nil
	}
}

// WithJournalSize caps how many keys the journal remembers for the primary
// (default DefaultJournalSize); see the package documentation ("Tiered
// fallback"). n must be at least 1.
func WithJournalSize(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithJournalSize(%d): must be at least 1", n)
		}
		c.journalSize = n
		return nil
	}
}

// WithCopyTimeout bounds each store call made by the background
// copy-forward (default DefaultCopyTimeout). d must be positive.
func WithCopyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithCopyTimeout(%v): must be positive", d)
		}
		c.copyTimeout = d
		return nil
	}
}

// WithObserver registers fn to receive every Event (default: none).
// fn is called synchronously and must be fast, safe for concurrent use,
// and must not call the tiered store's methods. fn must not be nil. A
// panic in fn is recovered and the event is dropped.
func WithObserver(fn func(Event)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithObserver(nil)")
		}
		c.observer = fn
		return nil
	}
}

// EventKind names what a Event reports.
type EventKind string

// Tier event kinds.
const (
	EventOpen        EventKind = "open"         // breaker opened: operations go to the fallback
	EventHalfOpen    EventKind = "half_open"    // cool-down over: the next operation probes the primary
	EventClosed      EventKind = "closed"       // the primary answered: operations go to it again
	EventCopied      EventKind = "copied"       // a fallback value was copied forward to the primary
	EventSuperseded  EventKind = "superseded"   // a fallback value replaced an earlier state of it in the primary
	EventConflict    EventKind = "conflict"     // the primary already held another value for a copied key; it was kept
	EventCopyFailed  EventKind = "copy_failed"  // a key could not be copied forward (not an outage)
	EventJournalFull EventKind = "journal_full" // a fallback key will not be copied forward
)

// Event is one event of a tiered store.
type Event struct {
	Kind EventKind
	// Key is the store key, for copy and journal events. Observers that
	// log should not log it raw.
	Key string
	// Err is the cause, for EventCopyFailed.
	Err error
}

// BreakerState is the state of a tiered store's circuit breaker.
type BreakerState int

// Breaker states.
const (
	// BreakerClosed: operations go to the primary.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: one probe goes to the primary, others to the fallback.
	BreakerHalfOpen
	// BreakerOpen: operations go to the fallback.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// Stats are a tiered store's counters since it was created.
type Stats struct {
	// State is the breaker's state as of the last operation.
	State BreakerState
	// FallbackOps counts operations answered by the fallback.
	FallbackOps uint64
	// PrimaryFailed counts operations the primary failed while the
	// breaker let them through; their error was returned.
	PrimaryFailed uint64
	// Journal is how many keys the journal holds: values to copy forward,
	// deletes to replay.
	Journal int
	// JournalDropped counts fallback values and deferred deletes not
	// journaled because the journal was full.
	JournalDropped uint64
	// Copied counts fallback values copied forward to the primary.
	Copied uint64
	// Superseded counts fallback values that replaced an earlier state of
	// themselves in the primary (see New's supersedes).
	Superseded uint64
	// Conflicts counts copied keys the primary already held with another
	// value (claimed meanwhile elsewhere); the primary's value was kept.
	Conflicts uint64
	// Skipped counts journaled keys that expired or were deleted before
	// they could be copied.
	Skipped uint64
	// CopyFailed counts keys that could not be copied, and deletes that
	// could not be replayed, for a reason other than an outage (a corrupt
	// or invalid entry, a failing fallback).
	CopyFailed uint64
	// DeferredDeletes counts CompareAndDeletes the primary did not confirm,
	// kept to be replayed on it; ReplayedDeletes counts those replayed.
	DeferredDeletes, ReplayedDeletes uint64
}
