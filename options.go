package idemkit

import (
	"fmt"
	"time"
)

// FailureMode says what the engine does when the store fails
// (errors wrapping ErrUnavailable).
type FailureMode int

const (
	// FailClosed (the default) returns an error wrapping ErrUnavailable and
	// runs nothing: no request goes through unprotected.
	FailClosed FailureMode = iota
	// FailOpen runs the work unprotected and reports an EventFailOpen to
	// the observer with the cause, so operators can count what went
	// through unguarded.
	FailOpen
)

// String returns "closed" or "open".
func (m FailureMode) String() string {
	if m == FailOpen {
		return "open"
	}
	return "closed"
}

// Release says when a Guard claim is removed before its window expires.
type Release int

const (
	// KeepUntilExpiry (the default) keeps the claim for the whole window,
	// whatever the work's outcome.
	KeepUntilExpiry Release = iota
	// ReleaseOnError removes the claim when the work fails or panics, so a
	// failed submit can be retried at once.
	ReleaseOnError
	// ReleaseOnDone removes the claim when the work ends, successful or
	// not: the guard then only stops concurrent repeats.
	ReleaseOnDone
)

// Oversized says what a Do or UseToken key keeps when the work's result
// is over the size cap (WithMaxResultSize, the store's value limit, or a
// limit of the store's own that refuses the record), so
// that it cannot be stored for replay. See WithOversized.
type Oversized int

const (
	// KeepTerminal (the default) records a terminal record in place of the
	// result: the work ran and is not run again, and every repeat of the
	// key gets an error wrapping ErrResultTooLarge, with Replayed set,
	// until the record's retention ends. The record keeps no part of the
	// result, only its size.
	KeepTerminal Oversized = iota
	// ReleaseKey releases the key, so a retry runs the work again (a token
	// is spent instead: its reuse gets ErrTokenUsed). Choose it only for
	// work that is safe to repeat.
	ReleaseKey
)

// String returns "keep-terminal" or "release-key".
func (o Oversized) String() string {
	if o == ReleaseKey {
		return "release-key"
	}
	return "keep-terminal"
}

// Defaults used when no option overrides them.
const (
	DefaultNamespace     = "idem"
	DefaultWindow        = 5 * time.Second
	DefaultLease         = 30 * time.Second
	DefaultRetention     = 24 * time.Hour
	DefaultTokenTTL      = 10 * time.Minute
	DefaultMaxResultSize = 1 << 20
	DefaultRetryHint     = time.Second
	DefaultPollInterval  = 20 * time.Millisecond
)

// config is the engine's settings; per-call options apply to a copy.
type config struct {
	namespace    string
	window       time.Duration
	lease        time.Duration
	heartbeat    time.Duration // 0: lease/3; <0: disabled
	retention    time.Duration
	tokenTTL     time.Duration
	release      Release
	failure      FailureMode
	maxResult    int
	oversized    Oversized
	retryHint    time.Duration
	pollInterval time.Duration
	wait         bool
	observer     Observer
	errorCodec   ErrorCodec
	codec        Codec
	set          optSet // the mode-specific options given per call (callConfig)
	scope        string // per call: the owner of the key
	readable     bool   // per engine: keys not hashed (debugging)
	clock        func() time.Time
	clockSet     bool   // WithClock was applied (per engine only)
	secret       []byte // per engine: the key secret (WithKeySecret), or nil
	secretSet    bool   // WithKeySecret was applied (per engine only)
	err          error  // first invalid option
}

func defaultConfig() config {
	return config{
		namespace:    DefaultNamespace,
		clock:        time.Now,
		window:       DefaultWindow,
		lease:        DefaultLease,
		retention:    DefaultRetention,
		tokenTTL:     DefaultTokenTTL,
		maxResult:    DefaultMaxResultSize,
		retryHint:    DefaultRetryHint,
		pollInterval: DefaultPollInterval,
		observer:     SlogObserver(nil),
		codec:        JSON,
	}
}

// Option configures the engine in New, a view in With, or a single call
// (Guard, Do, Begin, BeginBatch, IssueToken, UseToken) when passed to it.
// Options that only make sense for the engine (WithNamespace,
// WithReadableKeys, WithClock, WithKeySecret) are rejected per call, and so is a
// mode-specific option given to a call that does not use it (WithWindow to
// Do, WithWait to Guard, ...): Guard takes WithWindow and WithRelease; Do,
// Begin and BeginBatch take WithLease, WithHeartbeat, WithoutHeartbeat,
// WithRetention, WithMaxResultSize, WithOversized, WithWait,
// WithErrorCodec and WithCodec (Begin not WithCodec, BeginBatch neither
// WithCodec nor WithWait); IssueToken takes WithTokenTTL; UseToken takes
// both of the last two lists; Inspect, StoredResult and Forget take none.
// WithScope applies to every call but IssueToken and UseToken, whose
// principal argument is the token's scope. The other options apply to
// every call.
//
// The zero Option changes nothing.
type Option struct {
	apply func(*config) // nil for WithScope with a scope: see scopeOnly
	scope string        // WithScope's scope
	set   optSet        // the mode-specific option it is, if any
}

// optSet names mode-specific options, so a call can refuse one that does
// not apply to it instead of ignoring it.
type optSet uint16

const (
	optWindow optSet = 1 << iota
	optRelease
	optLease
	optHeartbeat
	optRetention
	optTokenTTL
	optMaxResult
	optOversized
	optWait
	optErrorCodec
	optCodec
	optScope
)

var optNames = [...]string{"WithWindow", "WithRelease", "WithLease", "WithHeartbeat or WithoutHeartbeat", "WithRetention",
	"WithTokenTTL", "WithMaxResultSize", "WithOversized", "WithWait", "WithErrorCodec", "WithCodec", "WithScope"}

// The mode-specific options each call takes. The token calls take no
// WithScope: their principal argument is the token's scope.
const (
	guardOpts      = optWindow | optRelease | optScope
	doOpts         = optLease | optHeartbeat | optRetention | optMaxResult | optOversized | optWait | optErrorCodec | optCodec | optScope
	beginOpts      = doOpts &^ optCodec   // a Begin claim reaches no typed helper
	batchOpts      = beginOpts &^ optWait // a batch never waits
	issueTokenOpts = optTokenTTL
	useTokenOpts   = (doOpts | optTokenTTL) &^ optScope
	inspectOpts    = optScope // Inspect, StoredResult and Forget
)

// mark makes an Option that records, per call, that a mode-specific
// option was given.
func mark(o optSet, f func(*config)) Option {
	return Option{apply: f, set: o}
}

// general makes an Option that applies to every call.
func general(f func(*config)) Option {
	return Option{apply: f}
}

// applyTo applies o to c.
func (o Option) applyTo(c *config) {
	c.set |= o.set
	if o.apply != nil {
		o.apply(c)
		return
	}
	if o.set == optScope {
		c.scope = o.scope
	}
}

// only returns an error wrapping ErrInvalid naming the first per-call
// option of set that call does not take.
func only(call string, set, allowed optSet) error {
	extra := set &^ allowed
	if extra == 0 {
		return nil
	}
	for i, name := range optNames {
		if extra&(1<<i) != 0 {
			return fmt.Errorf("idemkit: %w: %s does not apply to %s", ErrInvalid, name, call)
		}
	}
	return nil
}

func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
}

// checkHeartbeat refuses a heartbeat interval that is not shorter than
// the lease: its first beat would come after the lease had ended, so
// another caller could take the key while fn runs. Nothing replaces it.
func (c *config) checkHeartbeat() {
	if c.heartbeat > 0 && c.heartbeat >= c.lease {
		c.invalid("WithHeartbeat(%v) must be shorter than the lease (WithLease, %v): a beat must come before the lease ends", c.heartbeat, c.lease)
	}
}

func atLeast(c *config, name string, d, floor time.Duration, set func()) {
	if d < floor {
		c.invalid("%s must be at least %v, got %v", name, floor, d)
		return
	}
	set()
}

func positive(c *config, name string, d time.Duration, set func()) {
	if d <= 0 {
		c.invalid("%s must be positive, got %v", name, d)
		return
	}
	set()
}

// WithNamespace sets the prefix of every key the engine writes (default
// "idem"), so several engines or applications can share one store. It must
// be non-empty and must not contain ':'. Engine-level only.
func WithNamespace(ns string) Option {
	return general(func(c *config) {
		for i := 0; i < len(ns); i++ {
			if ns[i] == ':' || ns[i] < 0x21 || ns[i] > 0x7e {
				c.invalid("namespace %q must be printable ASCII without ':' or spaces", ns)
				return
			}
		}
		if ns == "" || len(ns) > 64 {
			c.invalid("namespace must have 1 to 64 bytes")
			return
		}
		c.namespace = ns
	})
}

// WithWindow sets how long a Guard claim holds (default 5s).
func WithWindow(d time.Duration) Option {
	return mark(optWindow, func(c *config) { positive(c, "window", d, func() { c.window = d }) })
}

// WithLease sets how long an in-progress claim of Do or UseToken lives
// without a heartbeat (default 30s, at least 3ms so a heartbeat fits in
// it). A crashed caller's key frees itself after at most this long.
func WithLease(d time.Duration) Option {
	return mark(optLease, func(c *config) { atLeast(c, "lease", d, 3*time.Millisecond, func() { c.lease = d }) })
}

// WithHeartbeat sets how often a running fn's lease is extended (default a
// third of the lease; at least 1ms). An interval not shorter than the
// lease in force (the engine's, a view's or the call's) is refused with
// ErrInvalid, by New, With or the call.
func WithHeartbeat(every time.Duration) Option {
	return mark(optHeartbeat, func(c *config) { atLeast(c, "heartbeat", every, time.Millisecond, func() { c.heartbeat = every }) })
}

// WithoutHeartbeat disables lease extension: fn must finish within the
// lease, or another caller may claim the key and fn gets ErrLeaseLost.
func WithoutHeartbeat() Option {
	return mark(optHeartbeat, func(c *config) { c.heartbeat = -1 })
}

// WithRetention sets how long a completed result is kept and replayed
// (default 24h).
func WithRetention(d time.Duration) Option {
	return mark(optRetention, func(c *config) { positive(c, "retention", d, func() { c.retention = d }) })
}

// WithTokenTTL sets how long an issued token stays valid (default 10m).
func WithTokenTTL(d time.Duration) Option {
	return mark(optTokenTTL, func(c *config) { positive(c, "token TTL", d, func() { c.tokenTTL = d }) })
}

// WithRelease sets when a Guard claim is removed (default KeepUntilExpiry).
func WithRelease(r Release) Option {
	return mark(optRelease, func(c *config) {
		if r < KeepUntilExpiry || r > ReleaseOnDone {
			c.invalid("unknown release behaviour %d", r)
			return
		}
		c.release = r
	})
}

// WithFailureMode sets the policy for store failures (default FailClosed).
func WithFailureMode(m FailureMode) Option {
	return general(func(c *config) {
		if m != FailClosed && m != FailOpen {
			c.invalid("unknown failure mode %d", m)
			return
		}
		c.failure = m
	})
}

// WithMaxResultSize caps the size in bytes of a stored result (default
// 1 MiB). A larger result is refused, never truncated: the call that ran
// the work gets it with an error wrapping ErrResultTooLarge, and what the
// key keeps is set by WithOversized.
func WithMaxResultSize(n int) Option {
	return mark(optMaxResult, func(c *config) {
		if n <= 0 {
			c.invalid("max result size must be positive, got %d", n)
			return
		}
		c.maxResult = n
	})
}

// WithOversized sets what a key keeps when the work's result is over the
// size cap (default KeepTerminal: a terminal record, so the work never
// runs twice; ReleaseKey releases the key, as for a failure that is not
// final). It returns an error wrapping ErrInvalid, from New, With or the
// call, for any other value.
func WithOversized(o Oversized) Option {
	return mark(optOversized, func(c *config) {
		if o != KeepTerminal && o != ReleaseKey {
			c.invalid("unknown oversized-result behaviour %d", o)
			return
		}
		c.oversized = o
	})
}

// WithRetryHint caps the RetryAfter reported with ErrInProgress (default
// 1s; never more than the lease's remaining time, when the store reports
// it: over a store.SetNXValuer, such as redisstore, Do's claim does not
// read it, and the hint is the cap, or the lease if that is shorter).
func WithRetryHint(d time.Duration) Option {
	return general(func(c *config) { positive(c, "retry hint", d, func() { c.retryHint = d }) })
}

// WithWait makes a concurrent duplicate of Do or UseToken wait for the
// first execution (bounded by its ctx) and return the stored result,
// instead of ErrInProgress. If the first execution fails and releases the
// key, the waiter claims it and runs fn itself. poll is the first polling
// interval (0 means DefaultPollInterval), between 1ms and 1m; it doubles up
// to ten times that.
func WithWait(poll time.Duration) Option {
	return mark(optWait, func(c *config) {
		if poll < 0 || (poll > 0 && poll < time.Millisecond) || poll > time.Minute {
			c.invalid("poll interval must be 0 or between 1ms and 1m, got %v", poll)
			return
		}
		c.wait = true
		if poll > 0 {
			c.pollInterval = poll
		}
	})
}

// WithObserver sets the observer of every outcome (default: SlogObserver
// over slog.Default()). A nil observer discards events.
func WithObserver(o Observer) Option {
	return general(func(c *config) {
		if o == nil {
			o = discard{}
		}
		c.observer = o
	})
}

// WithErrorCodec sets which errors of fn are final, and how they are
// stored and replayed. By default no error is final: a failed fn releases
// the key so a retry runs again. A nil ec restores that default, so a
// per-route view can turn final errors off again.
func WithErrorCodec(ec ErrorCodec) Option {
	return mark(optErrorCodec, func(c *config) { c.errorCodec = ec })
}

// WithCodec sets the codec of the typed helper Do (default JSON).
func WithCodec(cd Codec) Option {
	return mark(optCodec, func(c *config) {
		if cd == nil {
			c.invalid("nil codec")
			return
		}
		c.codec = cd
	})
}

// WithScope sets, for one call, the principal (user, tenant, client) that
// owns the key. Keys of different scopes never meet, whatever their text,
// and the scope is kept in store key names only as a digest (keyed with
// WithKeySecret; see the package documentation, "Keys and scopes"). Stores that
// keep per-scope quotas see it through ScopeOf. Per call only; a scope must
// not be empty. IssueToken and UseToken refuse it: their principal
// argument is the token's scope.
func WithScope(scope string) Option {
	if scope == "" {
		return mark(optScope, func(c *config) { c.invalid("empty scope") })
	}
	return Option{scope: scope, set: optScope}
}

// WithReadableKeys makes store key names keep the caller's keys and scopes
// (escaped with keying.Key) instead of their digests. It is meant for
// debugging: anyone who can list the store's keys can then read
// idempotency keys, principals and tokens, and spend the tokens; a key
// secret (WithKeySecret) still keys stored fingerprints and log digests.
// Engine-level only.
func WithReadableKeys() Option {
	return general(func(c *config) { c.readable = true })
}

// WithClock sets the clock that stamps the Created and Updated times of
// the records the engine writes (see Inspect). Nothing else reads it:
// leases, windows and retention expire on the store's own clock (the
// database's, Redis's), so instances whose clocks disagree still agree on
// every key. Tests use it to show exactly that. It must not be nil.
// Engine-level only.
func WithClock(now func() time.Time) Option {
	return general(func(c *config) {
		if now == nil {
			c.invalid("nil clock")
			return
		}
		c.clock = now
		c.clockSet = true
	})
}
