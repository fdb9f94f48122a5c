package idemkit

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// EventKind names an outcome the engine reports to its Observer.
type EventKind string

// Event kinds.
const (
	EventAdmitted     EventKind = "admitted"      // first request; the work runs
	EventDuplicate    EventKind = "duplicate"     // repeat inside a Guard window
	EventReplayed     EventKind = "replayed"      // stored result returned
	EventInProgress   EventKind = "in_progress"   // repeat while the first runs
	EventMismatch     EventKind = "mismatch"      // same key, different payload
	EventLeaseLost    EventKind = "lease_lost"    // outcome not recorded; fn's context cancelled if it still ran
	EventReleased     EventKind = "released"      // claim removed after a failure or by policy
	EventStoreError   EventKind = "store_error"   // the store failed
	EventFailOpen     EventKind = "fail_open"     // work ran unprotected
	EventTokenIssued  EventKind = "token_issued"  // a token was issued
	EventTokenInvalid EventKind = "token_invalid" // a token was refused
	EventTooLarge     EventKind = "too_large"     // result over the size cap
	EventAmbiguous    EventKind = "ambiguous"     // a claim the store may have applied was undone
	EventForgotten    EventKind = "forgotten"     // an operator deleted a key (Forget)
	EventCompleted    EventKind = "completed"     // the work's result (or final error) was recorded
)

// Mode names the engine mode an event comes from.
type Mode string

// Modes.
const (
	ModeGuard Mode = "guard"
	ModeDo    Mode = "do"
	ModeToken Mode = "token"
)

// Event describes one outcome.
type Event struct {
	Kind EventKind
	Mode Mode
	// Key is the caller's key (fingerprint, idempotency key or token) as
	// given. Observers that log should not log it raw: see KeyDigest.
	Key string
	// Err is the cause, for store errors, fail-open and lease loss.
	Err error
	// RetryAfter is the hint given with a duplicate or in-progress event.
	RetryAfter time.Duration
	// Duration is how long an admitted claim (of Do, UseToken, Begin or
	// BeginBatch) was held: from admission to the event that ends it.
	// Exactly one event per admitted claim carries a Duration (> 0): the
	// one that ends it, which is EventCompleted, EventReleased,
	// EventLeaseLost or EventStoreError. Should a claim's end report more
	// than one event (a completion that failed, then a release; a
	// completion in a transaction that rolled back, then a release), only
	// the first carries it. An observer can so count claims in flight: +1
	// on EventAdmitted of ModeDo or ModeToken, -1 on any event with a
	// Duration. Guard events carry no Duration.
	Duration time.Duration

	scope string // the call's scope (a token's principal), for KeyDigest
	keys  *keyer // the engine's key secret, for KeyDigest
}

// KeyDigest returns a short digest (12 hex digits) of the event's key and
// scope, to log in place of the key. For an engine with a key secret
// (WithKeySecret) it is keyed: nobody without the secret can tell which
// key it names. Without a secret it is plain SHA-256, which hides a random
// key but not a guessable one: anyone who reads the log can hash guesses
// (integers, e-mail addresses, order numbers) until one matches. An Event
// the engine did not deliver (built by the caller) has no scope and no
// secret. (*Engine).KeyDigest computes the same digest from a key.
func (e Event) KeyDigest() string {
	return e.keys.logDigest(e.scope, e.Key)
}

// Observer receives every outcome. Observe is called synchronously on the
// request's goroutine, so it must be fast and safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, ev Event)
}

// Tracer is implemented by observers that also trace calls. When the
// engine's observer is a Tracer, every Guard, Do, Begin, IssueToken and
// UseToken calls Start first and end when it returns, with its error; the
// returned context (carrying the span, say) is the one fn runs with and
// the one the call's events are observed with, so an observer can mark the
// span with each outcome.
type Tracer interface {
	Start(ctx context.Context, mode Mode, op string) (_ context.Context, end func(err error))
}

// trace starts a traced call when the observer is a Tracer, and returns
// the context to run it with and the function that ends it: nil for an
// untraced call. A panicking Start is recovered, as a panicking Observe
// is: the call then runs untraced, with ctx.
func trace(ctx context.Context, cfg *config, mode Mode, op string) (context.Context, func(error)) {
	t, ok := cfg.observer.(Tracer)
	if !ok {
		return ctx, nil
	}
	return startTrace(ctx, t, mode, op)
}

func startTrace(ctx context.Context, t Tracer, mode Mode, op string) (tctx context.Context, end func(error)) {
	defer func() {
		if recover() != nil {
			tctx, end = ctx, nil
		}
	}()
	tctx, end = t.Start(ctx, mode, op)
	if tctx == nil {
		tctx = ctx
	}
	return tctx, end
}

// endTrace ends a traced call with its error; end is nil for an untraced
// one. A panicking end is recovered: it runs after the call has taken or
// settled its claim (Begin returns one), and reporting must never lose a
// claim or a caller's answer.
func endTrace(end func(error), err error) {
	if end == nil {
		return
	}
	defer func() { _ = recover() }()
	end(err)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, ev Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, ev Event) { f(ctx, ev) }

type discard struct{}

func (discard) Observe(context.Context, Event) {}

// SlogObserver returns the default observer: it logs with l (slog.Default()
// when nil) and never logs raw keys, only KeyDigest. Levels: the outcomes
// of normal traffic (admitted, replayed, duplicate, in progress, released,
// token issued) at Debug, so a retry storm does not flood the log; client
// mistakes (mismatch, invalid token) at Info; lost leases, fail-open runs
// and oversized results at Warn; store errors at Error.
func SlogObserver(l *slog.Logger) Observer {
	return slogObserver{l: l}
}

type slogObserver struct{ l *slog.Logger }

func (o slogObserver) Observe(ctx context.Context, ev Event) {
	l := o.l
	if l == nil {
		l = slog.Default()
	}
	level := eventLevel(ev.Kind)
	if !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("mode", string(ev.Mode)),
		slog.String("key_digest", ev.KeyDigest()),
	}
	if ev.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", ev.RetryAfter))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", redact(ev.Err.Error(), ev.Key, ev.KeyDigest())))
	}
	l.LogAttrs(ctx, level, "idemkit: "+string(ev.Kind), attrs...)
}

// redact replaces the raw key, as is and as quoted by %q, in an error text
// (stores name keys in their errors) with its digest.
func redact(msg, key, digest string) string {
	if key == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, key, "<key "+digest+">")
	if q := strconv.Quote(key); q[1:len(q)-1] != key {
		msg = strings.ReplaceAll(msg, q[1:len(q)-1], "<key "+digest+">")
	}
	return msg
}

func eventLevel(k EventKind) slog.Level {
	switch k {
	case EventAdmitted, EventReplayed, EventDuplicate, EventInProgress, EventReleased, EventTokenIssued, EventCompleted:
		return slog.LevelDebug
	case EventLeaseLost, EventFailOpen, EventTooLarge, EventAmbiguous, EventForgotten:
		return slog.LevelWarn
	case EventStoreError:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
