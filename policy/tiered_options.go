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

// TieredOption configures a Tiered store.
type TieredOption func(*tieredConfig)

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
// DefaultFailureThreshold). Values below 1 select the default.
func WithFailureThreshold(n int) TieredOption {
	return func(c *tieredConfig) {
		if n >= 1 {
			c.threshold = n
		}
	}
}

// WithCoolDown sets how long the breaker stays open before one probe goes
// to the primary (default DefaultCoolDown). Values <= 0 select the default.
func WithCoolDown(d time.Duration) TieredOption {
	return func(c *tieredConfig) {
		if d > 0 {
			c.coolDown = d
		}
	}
}

// WithJournalSize caps how many keys written to the fallback are remembered
// for copy-forward (default DefaultJournalSize). A key written while the
// journal is full is not copied forward; the Tiered counts it and reports
// TierJournalFull. Values below 1 select the default.
func WithJournalSize(n int) TieredOption {
	return func(c *tieredConfig) {
		if n >= 1 {
			c.journalSize = n
		}
	}
}

// WithCopyTimeout bounds each store call made by the background
// copy-forward (default DefaultCopyTimeout). Values <= 0 select the default.
func WithCopyTimeout(d time.Duration) TieredOption {
	return func(c *tieredConfig) {
		if d > 0 {
			c.copyTimeout = d
		}
	}
}

// WithTierObserver registers fn to receive every TierEvent (default: none).
// fn is called synchronously: breaker state changes while the breaker's
// lock is held, copy events on the goroutine doing the copy. It must be
// fast, safe for concurrent use, and must not call the Tiered's store
// methods; Stats and State are safe to call.
func WithTierObserver(fn func(TierEvent)) TieredOption {
	return func(c *tieredConfig) { c.observer = fn }
}

// TierEventKind names what a TierEvent reports.
type TierEventKind string

// Tier event kinds.
const (
	TierOpen        TierEventKind = "open"         // breaker opened: operations go to the fallback
	TierHalfOpen    TierEventKind = "half_open"    // cool-down over: the next operation probes the primary
	TierClosed      TierEventKind = "closed"       // the primary answered: operations go to it again
	TierCopied      TierEventKind = "copied"       // a fallback claim was copied forward to the primary
	TierConflict    TierEventKind = "conflict"     // the primary already held another value for a copied key
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
	// Retried counts, among FallbackOps, operations the primary failed
	// (with the breaker still letting them through) before the fallback
	// answered them.
	Retried uint64
	// Journal is how many fallback keys wait to be copied forward.
	Journal int
	// JournalDropped counts fallback keys not journaled because the
	// journal was full.
	JournalDropped uint64
	// Copied counts fallback keys copied forward to the primary.
	Copied uint64
	// Conflicts counts copied keys the primary already held with another
	// value (claimed meanwhile elsewhere); the primary's value was kept.
	Conflicts uint64
	// Skipped counts journaled keys that expired or were deleted before
	// they could be copied.
	Skipped uint64
	// CopyFailed counts keys that could not be copied for a reason other
	// than an outage (a corrupt or invalid entry, a failing fallback).
	CopyFailed uint64
}
