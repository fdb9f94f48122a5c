package idemkit

import (
	"errors"
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
	opName       string // per call: the operation's name (WithInput)
	opInput      []byte // per call: its input (WithInput)
	oversized    Oversized
	retryHint    time.Duration
	pollInterval time.Duration
	wait         bool
	observer     Observer
	errorCodec   ErrorCodec
	codec        Codec
	set          optSet // the options applied to this config, by what they set
	scope        string // per call: the owner of the key
	readable     bool   // per engine: keys not hashed (debugging)
	clock        func() time.Time
	secret       []byte // per engine: the key secret (WithKeySecret), or nil
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
// It follows the one option rule of every idemkit package: a nil option
// is refused with its position, every invalid option is reported (not
// only the first), and the error wraps ErrInvalid. Nothing is clamped or
// ignored: options that only make sense for the engine (WithNamespace,
// WithReadableKeys, WithClock, WithKeySecret) are refused by With and per
// call, and so is a mode-specific option given to a call that does not
// use it (WithWindow to Do, WithWait to Guard, ...): Guard takes
// WithWindow and WithRelease; Do, Begin and BeginBatch take WithLease,
// WithHeartbeat, WithoutHeartbeat, WithRetention, WithMaxResultSize,
// WithOversized, WithWait, WithErrorCodec and WithCodec (Begin not
// WithCodec, BeginBatch neither WithCodec nor WithWait); IssueToken takes
// WithTokenTTL; UseToken takes both of the last two lists; Inspect,
// StoredResult and Forget take none. WithScope applies to every call but
// IssueToken and UseToken, whose principal argument is the token's
// scope. The other options apply to every call.
type Option func(*config) error

// optSet names options by what they set, so a call can refuse one that
// does not apply to it instead of ignoring it, and can tell a call whose
// only options are scopes (an adapter's) from any other.
type optSet uint32

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
	optInput
	optNamespace // engine-level only, from here on
	optReadable
	optClock
	optSecret
	optGeneral // an option that applies to every call
)

var optNames = [...]string{"WithWindow", "WithRelease", "WithLease", "WithHeartbeat or WithoutHeartbeat", "WithRetention",
	"WithTokenTTL", "WithMaxResultSize", "WithOversized", "WithWait", "WithErrorCodec", "WithCodec", "WithScope", "WithInput",
	"WithNamespace", "WithReadableKeys", "WithClock", "WithKeySecret"}

// engineOnly are the options New takes and With and the calls refuse.
const engineOnly = optNamespace | optReadable | optClock | optSecret

// The mode-specific options each call takes. The token calls take no
// WithScope: their principal argument is the token's scope.
const (
	guardOpts      = optWindow | optRelease | optScope
	doOpts         = optLease | optHeartbeat | optRetention | optMaxResult | optOversized | optWait | optErrorCodec | optCodec | optScope | optInput
	beginOpts      = doOpts &^ optCodec                // a Begin claim reaches no typed helper
	batchOpts      = beginOpts &^ (optWait | optInput) // a batch never waits, and its requests share the options
	issueTokenOpts = optTokenTTL
	useTokenOpts   = (doOpts | optTokenTTL) &^ (optScope | optInput)
	inspectOpts    = optScope // Inspect, StoredResult and Forget
)

// only returns an error wrapping ErrInvalid naming the first option of
// set, other than the ones that apply to every call, that call does not
// take.
func only(call string, set, allowed optSet) error {
	extra := set &^ (allowed | optGeneral)
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

// checkHeartbeat refuses a heartbeat interval that is not shorter than
// the lease: its first beat would come after the lease had ended, so
// another caller could take the key while fn runs. Nothing replaces it.
func (c *config) checkHeartbeat() error {
	if c.heartbeat > 0 && c.heartbeat >= c.lease {
		return fmt.Errorf("WithHeartbeat(%v) must be shorter than the lease (WithLease, %v): a beat must come before the lease ends", c.heartbeat, c.lease)
	}
	return nil
}

func atLeast(name string, d, floor time.Duration) error {
	if d < floor {
		return fmt.Errorf("%s(%v): must be at least %v", name, d, floor)
	}
	return nil
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s(%v): must be positive", name, d)
	}
	return nil
}

// WithNamespace sets the prefix of every key the engine writes (default
// "idem"), so several engines or applications can share one store. It must
// be non-empty and must not contain ':'. Engine-level only.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		c.set |= optNamespace
		for i := 0; i < len(ns); i++ {
			if ns[i] == ':' || ns[i] < 0x21 || ns[i] > 0x7e {
				return fmt.Errorf("WithNamespace(%q): must be printable ASCII without ':' or spaces", ns)
			}
		}
		if ns == "" || len(ns) > 64 {
			return fmt.Errorf("WithNamespace: must have 1 to 64 bytes, got %d", len(ns))
		}
		c.namespace = ns
		return nil
	}
}

// WithWindow sets how long a Guard claim holds (default 5s).
func WithWindow(d time.Duration) Option {
	return func(c *config) error {
		c.set |= optWindow
		c.window = d
		return positive("WithWindow", d)
	}
}

// WithLease sets how long an in-progress claim of Do or UseToken lives
// without a heartbeat (default 30s, at least 3ms so a heartbeat fits in
// it). A crashed caller's key frees itself after at most this long.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		c.set |= optLease
		c.lease = d
		return atLeast("WithLease", d, 3*time.Millisecond)
	}
}

// WithHeartbeat sets how often a running fn's lease is extended (default a
// third of the lease; at least 1ms). An interval not shorter than the
// lease in force (the engine's, a view's or the call's) is refused with
// ErrInvalid, by New, With or the call.
func WithHeartbeat(every time.Duration) Option {
	return func(c *config) error {
		c.set |= optHeartbeat
		c.heartbeat = every
		return atLeast("WithHeartbeat", every, time.Millisecond)
	}
}

// WithoutHeartbeat disables lease extension: fn must finish within the
// lease, or another caller may claim the key and fn gets ErrLeaseLost
// when it completes. Nothing watches the lease meanwhile, so fn's context
// is never cancelled for a lost lease.
func WithoutHeartbeat() Option {
	return func(c *config) error {
		c.set |= optHeartbeat
		c.heartbeat = -1
		return nil
	}
}

// WithRetention sets how long a completed result is kept and replayed
// (default 24h).
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		c.set |= optRetention
		c.retention = d
		return positive("WithRetention", d)
	}
}

// WithTokenTTL sets how long an issued token stays valid (default 10m).
func WithTokenTTL(d time.Duration) Option {
	return func(c *config) error {
		c.set |= optTokenTTL
		c.tokenTTL = d
		return positive("WithTokenTTL", d)
	}
}

// WithRelease sets when a Guard claim is removed (default KeepUntilExpiry).
func WithRelease(r Release) Option {
	return func(c *config) error {
		c.set |= optRelease
		if r < KeepUntilExpiry || r > ReleaseOnDone {
			return fmt.Errorf("WithRelease(%d): unknown release behaviour", r)
		}
		c.release = r
		return nil
	}
}

// WithFailureMode sets the policy for store failures (default FailClosed).
func WithFailureMode(m FailureMode) Option {
	return func(c *config) error {
		c.set |= optGeneral
		if m != FailClosed && m != FailOpen {
			return fmt.Errorf("WithFailureMode(%d): unknown failure mode", m)
		}
		c.failure = m
		return nil
	}
}

// WithMaxResultSize caps the size in bytes of a stored result (default
// 1 MiB). A larger result is refused, never truncated: the call that ran
// the work gets it with an error wrapping ErrResultTooLarge, and what the
// key keeps is set by WithOversized.
func WithMaxResultSize(n int) Option {
	return func(c *config) error {
		c.set |= optMaxResult
		if n <= 0 {
			return fmt.Errorf("WithMaxResultSize(%d): must be positive", n)
		}
		c.maxResult = n
		return nil
	}
}

// WithOversized sets what a key keeps when the work's result is over the
// size cap (default KeepTerminal: a terminal record, so the work never
// runs twice; ReleaseKey releases the key, as for a failure that is not
// final). It returns an error wrapping ErrInvalid, from New, With or the
// call, for any other value.
func WithOversized(o Oversized) Option {
	return func(c *config) error {
		c.set |= optOversized
		if o != KeepTerminal && o != ReleaseKey {
			return fmt.Errorf("WithOversized(%d): unknown oversized-result behaviour", o)
		}
		c.oversized = o
		return nil
	}
}

// WithRetryHint caps the RetryAfter reported with ErrInProgress (default
// 1s; never more than the lease's remaining time, when the store reports
// it: over a store.SetNXValuer, such as redisstore, Do's claim does not
// read it, and the hint is the cap, or the lease if that is shorter).
func WithRetryHint(d time.Duration) Option {
	return func(c *config) error {
		c.set |= optGeneral
		c.retryHint = d
		return positive("WithRetryHint", d)
	}
}

// WithWait makes a concurrent duplicate of Do or UseToken wait for the
// first execution (bounded by its ctx) and return the stored result,
// instead of ErrInProgress. If the first execution fails and releases the
// key, the waiter claims it and runs fn itself. poll is the first polling
// interval (0 means DefaultPollInterval), between 1ms and 1m; it doubles up
// to ten times that.
func WithWait(poll time.Duration) Option {
	return func(c *config) error {
		c.set |= optWait
		if poll < 0 || (poll > 0 && poll < time.Millisecond) || poll > time.Minute {
			return fmt.Errorf("WithWait(%v): the poll interval must be 0 or between 1ms and 1m", poll)
		}
		c.wait = true
		if poll > 0 {
			c.pollInterval = poll
		}
		return nil
	}
}

// WithObserver sets the observer of every outcome (default: SlogObserver
// over slog.Default()). A nil observer discards events.
func WithObserver(o Observer) Option {
	if o == nil {
		o = discard{}
	}
	return func(c *config) error {
		c.set |= optGeneral
		c.observer = o
		return nil
	}
}

// WithErrorCodec sets which errors of fn are final, and how they are
// stored and replayed. By default no error is final: a failed fn releases
// the key so a retry runs again. A nil ec restores that default, so a
// per-route view can turn final errors off again. Given twice in one
// list of options (to New, With or a call), it is refused: the second
// would replace the first.
func WithErrorCodec(ec ErrorCodec) Option {
	return func(c *config) error {
		if c.set&optErrorCodec != 0 {
			return errors.New("WithErrorCodec: given twice in one list; the second would replace the first")
		}
		c.set |= optErrorCodec
		c.errorCodec = ec
		return nil
	}
}

// WithCodec sets the codec of the typed helper Do (default JSON). Given
// twice in one list of options, it is refused, as WithErrorCodec is.
func WithCodec(cd Codec) Option {
	return func(c *config) error {
		if c.set&optCodec != 0 {
			return errors.New("WithCodec: given twice in one list; the second would replace the first")
		}
		c.set |= optCodec
		if cd == nil {
			return errors.New("WithCodec(nil): the codec must not be nil")
		}
		c.codec = cd
		return nil
	}
}

// WithScope sets, for one call, the principal (user, tenant, client) that
// owns the key. Keys of different scopes never meet, whatever their text,
// and the scope is kept in store key names only as a digest (keyed with
// WithKeySecret; see the package documentation, "Keys and scopes"). Stores that
// keep per-scope quotas see it through ScopeOf. Per call only; a scope must
// not be empty. IssueToken and UseToken refuse it: their principal
// argument is the token's scope.
func WithScope(scope string) Option {
	return func(c *config) error {
		c.set |= optScope
		if scope == "" {
			return errors.New(`WithScope(""): the scope must not be empty`)
		}
		c.scope = scope
		return nil
	}
}

// WithReadableKeys makes store key names keep the caller's keys and scopes
// (escaped with keying.Key) instead of their digests. It is meant for
// debugging: anyone who can list the store's keys can then read
// idempotency keys, principals and tokens, and spend the tokens; a key
// secret (WithKeySecret) still keys stored fingerprints and log digests.
// Engine-level only.
func WithReadableKeys() Option {
	return func(c *config) error {
		c.set |= optReadable
		c.readable = true
		return nil
	}
}

// WithClock sets the clock that stamps the Created and Updated times of
// the records the engine writes (see Inspect). Nothing else reads it:
// leases, windows and retention expire on the store's own clock (the
// database's, Redis's), so instances whose clocks disagree still agree on
// every key. Tests use it to show exactly that. It must not be nil.
// Engine-level only.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		c.set |= optClock
		if now == nil {
			return errors.New("WithClock(nil): the clock must not be nil")
		}
		c.clock = now
		return nil
	}
}
