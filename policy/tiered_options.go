package policy

import "time"

// Defaults of a Tiered store.
const (
	// DefaultFailureThreshold is how many consecutive primary failures open
	// the breaker.
	DefaultFailureThreshold = 5
	// DefaultCoolDown is how long the breaker stays open before it lets a
	// probe through to the primary.
	DefaultCoolDown = time.Second
	// DefaultJournalSize is how many fallback keys a Tiered remembers for
	// copy-forward.
	DefaultJournalSize = 100_000
	// DefaultCopyTimeout bounds each store call of the background
	// copy-forward.
	DefaultCopyTimeout = time.Second
)

// TieredOption configures a Tiered store. An invalid option makes
// NewTiered return an error naming it.
type TieredOption func(*tieredConfig) error

type tieredConfig struct {
	threshold   int
	coolDown    time.Duration
	journalSize int
	copyTimeout time.Duration
	observer    func(TierEvent)
}

func defaultTieredConfig() tieredConfig {
	return tieredConfig{
		threshold:   DefaultFailureThreshold,
		coolDown:    DefaultCoolDown,
		journalSize: DefaultJournalSize,
		copyTimeout: DefaultCopyTimeout,
	}
}

// WithFailureThreshold sets how many consecutive primary failures (errors
// wrapping store.ErrUnavailable) open the breaker (default
// DefaultFailureThreshold). n must be at least 1.
func WithFailureThreshold(n int) TieredOption {
	return func(c *tieredConfig) error {
		if n < 1 {
			return invalid("WithFailureThreshold(%d): must be at least 1", n)
		}
		c.threshold = n
		return nil
	}
}

// WithCoolDown sets how long the breaker stays open before one probe goes
// to the primary (default DefaultCoolDown). d must be positive.
func WithCoolDown(d time.Duration) TieredOption {
	return func(c *tieredConfig) error {
		if d <= 0 {
			return invalid("WithCoolDown(%v): must be positive", d)
		}
		c.coolDown = d
		return nil
	}
}

// WithJournalSize caps how many keys the journal remembers for the primary
// (default DefaultJournalSize); see the package documentation ("Tiered
// fallback"). n must be at least 1.
func WithJournalSize(n int) TieredOption {
	return func(c *tieredConfig) error {
		if n < 1 {
			return invalid("WithJournalSize(%d): must be at least 1", n)
		}
		c.journalSize = n
		return nil
	}
}

// WithCopyTimeout bounds each store call made by the background
// copy-forward (default DefaultCopyTimeout). d must be positive.
func WithCopyTimeout(d time.Duration) TieredOption {
	return func(c *tieredConfig) error {
		if d <= 0 {
			return invalid("WithCopyTimeout(%v): must be positive", d)
		}
		c.copyTimeout = d
		return nil
	}
}

// WithTierObserver registers fn to receive every TierEvent (default: none).
// fn is called synchronously and must be fast, safe for concurrent use,
// and must not call the Tiered's store methods. fn must not be nil. A
// panic in fn is recovered and the event is dropped.
func WithTierObserver(fn func(TierEvent)) TieredOption {
	return func(c *tieredConfig) error {
		if fn == nil {
			return invalid("WithTierObserver(nil)")
		}
		c.observer = fn
		return nil
	}
}

// TierEventKind names what a TierEvent reports.
type TierEventKind string

// Tier event kinds.
const (
	TierOpen        TierEventKind = "open"         // breaker opened: operations go to the fallback
	TierHalfOpen    TierEventKind = "half_open"    // cool-down over: the next operation probes the primary
	TierClosed      TierEventKind = "closed"       // the primary answered: operations go to it again
	TierCopied      TierEventKind = "copied"       // a fallback value was copied forward to the primary
	TierSuperseded  TierEventKind = "superseded"   // a fallback value replaced an earlier state of it in the primary
	TierConflict    TierEventKind = "conflict"     // the primary already held another value for a copied key; it was kept
	TierCopyFailed  TierEventKind = "copy_failed"  // a key could not be copied forward (not an outage)
	TierJournalFull TierEventKind = "journal_full" // a fallback key will not be copied forward
)

// TierEvent is one event of a Tiered store.
type TierEvent struct {
	Kind TierEventKind
	// Key is the store key, for copy and journal events. Observers that
	// log should not log it raw.
	Key string
	// Err is the cause, for TierCopyFailed.
	Err error
}

// BreakerState is the state of a Tiered store's circuit breaker.
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

// TieredStats are a Tiered store's counters since it was created.
type TieredStats struct {
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
	// themselves in the primary (see NewTiered's supersedes).
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
