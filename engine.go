package idemkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// Engine decides, over a Store, whether a request runs. It offers three
// modes over the same store, each in its own key space:
//
//   - Guard: a dedup window keyed by a request fingerprint.
//   - IssueToken and UseToken: one-time tokens bound to a principal.
//   - Do: idempotent execution keyed by a business idempotency key, with
//     the result stored and replayed.
//
// An Engine is safe for concurrent use. Its zero value is not usable: call
// New.
type Engine struct {
	store    store.Store
	valuer   store.SetNXValuer // store as a SetNXValuer, or nil; see claim
	cfg      config
	prefix   [3]string // per key space, see storeKey
	instance [8]byte
	beats    *beats  // the claims' heartbeats, shared with views; nil on OnStore views
	scopes   *scopes // what store keys derive from scopes, shared with views
	keys     *keyer  // the key secret (WithKeySecret), or nil; shared with views
	inTx     bool    // an OnStore view: claims live in the caller's transaction (see claimTTL)
}

// Result is the outcome of Do or UseToken.
type Result struct {
	// Value is fn's result, or the stored result of an earlier execution.
	Value []byte
	// Replayed is true when Value (or the returned final error, or the
	// ErrResultTooLarge of a result too large to keep) comes from an
	// earlier execution and fn did not run.
	Replayed bool
	// Unguarded is true when the store failed, the engine runs fail-open,
	// and fn ran without protection.
	Unguarded bool
}

// New returns an Engine over s. Options set engine-wide defaults; most of
// them can also be passed to a single call, or fixed for a route with
// With. It returns an error wrapping ErrInvalid for a nil store or an
// invalid option.
func New(s store.Store, opts ...Option) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	cfg := defaultConfig()
	errs := options.Collect(&cfg, opts)
	if cfg.set&optScope != 0 {
		errs = append(errs, errors.New("the scope is set per call, not per engine"))
	}
	if cfg.set&optInput != 0 {
		errs = append(errs, errors.New("WithInput is set per call, not per engine"))
	}
	if len(errs) == 0 {
		errs = append(errs, cfg.checkHeartbeat())
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemkit: %w", err)
	}
	cfg.set = 0 // engine-wide options apply to the calls that use them
	keys := newKeyer(cfg.secret)
	e := &Engine{store: s, cfg: cfg, beats: &beats{}, scopes: newScopes(keys), keys: keys}
	e.valuer, _ = s.(store.SetNXValuer)
	for i, space := range []string{"g", "i", "t"} {
		e.prefix[i] = cfg.namespace + ":" + space + ":"
	}
	if _, err := rand.Read(e.instance[:]); err != nil {
		return nil, fmt.Errorf("idemkit: instance id: %w", err)
	}
	return e, nil
}

// With returns a view of e whose defaults are e's with opts applied. The
// view shares e's store, instance and namespace, so claims made through
// either are the same claims. Adapters build one view per route at start-up
// instead of passing options on every call. It returns an error wrapping
// ErrInvalid for an invalid option, or one that is set per engine
// (WithNamespace, WithReadableKeys, WithClock, WithKeySecret) or per call
// (WithScope).
func (e *Engine) With(opts ...Option) (*Engine, error) {
	cfg, scope, err := e.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if scope != "" {
		return nil, fmt.Errorf("idemkit: %w: the scope is set per call, not per view", ErrInvalid)
	}
	if cfg.set&optInput != 0 {
		return nil, fmt.Errorf("idemkit: %w: WithInput is set per call, not per view", ErrInvalid)
	}
	v := *e
	v.cfg = *cfg
	v.cfg.set = 0 // a view's options apply to the calls that use them
	return &v, nil
}

// OnStore returns a view of e that works on s, a view of e's backend bound
// to the caller's transaction (such as a SQL store's transaction view), for
// the mode where claim, effect and completion commit together: a concurrent
// duplicate waits on the key until the transaction ends, and a crash rolls
// everything back, so the view runs without heartbeats. The view shares
// e's options, instance and key layout.
//
// No lease applies in this mode: the transaction's row lock, not the
// record's TTL, keeps duplicates out, and no other caller sees the
// in-progress record before the commit. A claim made through the view
// therefore lives for the longer of the lease and the retention
// (WithRetention), so a transaction longer than the lease still records
// its result; bound a transaction's length with the transaction's own
// timeout (a context deadline, statement_timeout, innodb_lock_wait_timeout).
// A caller who commits a claim it never ended (Begin, then commit without
// Complete, Fail or Release) has committed its work with no result: the
// key then answers ErrInProgress until that claim's TTL ends, and never
// runs the work a second time; Forget frees it at once. s must be bound to
// a transaction: over a store that commits each write at once, a claim
// left by a crash would hold its key for that long too.
func (e *Engine) OnStore(s store.Store) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("idemkit: %w: nil store", ErrInvalid)
	}
	v := *e
	v.store = s
	v.valuer, _ = s.(store.SetNXValuer)
	v.cfg.heartbeat = -1
	v.beats = nil // and no per-call WithHeartbeat or With view of it beats the caller's transaction
	v.inTx = true
	return &v, nil
}

// claimTTL is the TTL of an in-progress record written with cfg: the
// lease and the tail after it that keeps the key's fencing token (see
// fence.go), or on an OnStore view, whose claims only the caller's
// transaction can see until it commits, the longer of the lease and the
// retention (see OnStore). A claim in a transaction is completed by a
// swap that the store refuses once the in-progress record has expired,
// and nothing there renews it.
func (e *Engine) claimTTL(cfg *config, tail time.Duration) time.Duration {
	if e.inTx {
		return max(cfg.lease, cfg.retention)
	}
	return cfg.lease + tail
}

// Store returns the store the engine works on.
func (e *Engine) Store() store.Store { return e.store }

// callConfig returns the config of one call, the engine's with opts
// applied, and the call's scope (WithScope). When opts hold nothing but
// scopes, as an adapter's calls do, the config is the engine's own, which
// must not be changed, and the copy the options were applied to goes back
// to a pool: such a call allocates no config.
func (e *Engine) callConfig(opts []Option) (*config, string, error) {
	if len(opts) == 0 {
		return &e.cfg, "", nil
	}
	cfg := configs.Get().(*config)
	*cfg = e.cfg
	cfg.set = 0
	errs := options.Collect(cfg, opts)
	if len(errs) == 0 && cfg.set == optScope {
		scope := cfg.scope
		*cfg = config{}
		configs.Put(cfg)
		return &e.cfg, scope, nil
	}
	if extra := cfg.set & engineOnly; extra != 0 {
		for i, name := range optNames {
			if extra&(1<<i) != 0 {
				errs = append(errs, fmt.Errorf("%s is set per engine, not per view or call", name))
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, cfg.checkHeartbeat())
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, "", fmt.Errorf("idemkit: %w", err)
	}
	return cfg, cfg.scope, nil
}

// configs holds the configs of calls whose only options were scopes,
// for the next call to apply its options to.
var configs = sync.Pool{New: func() any { return new(config) }}

// callConfigFor is callConfig for a call that takes, of the mode-specific
// options, only those in allowed: another given per call is refused
// rather than ignored.
func (e *Engine) callConfigFor(call string, allowed optSet, opts []Option) (*config, string, error) {
	cfg, scope, err := e.callConfig(opts)
	if err != nil {
		return nil, "", err
	}
	set := cfg.set
	if cfg == &e.cfg && scope != "" {
		set = optScope // the engine's config records no per-call option
	}
	if err := only(call, set, allowed); err != nil {
		return nil, "", err
	}
	return cfg, scope, nil
}

// detach returns a context for work that must finish even when the caller
// has gone away (recording, releasing, heartbeats): ctx without its
// cancellation. A context that can never be cancelled is returned as is.
func detach(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// nonce identifies one caller's claim: the engine instance's random id and
// 64 random bits from the runtime's per-thread generator (math/rand/v2),
// which, unlike a shared counter, costs no cross-core traffic. Two claims
// of one instance collide with probability 2^-64.
type nonce [16]byte

func (e *Engine) newNonce() nonce {
	var n nonce
	copy(n[:8], e.instance[:])
	binary.BigEndian.PutUint64(n[8:], mrand.Uint64())
	return n
}

// observe hands ev to the observer. A panicking observer is recovered:
// reporting must never leave a claim held or a request unanswered.
func (e *Engine) observe(ctx context.Context, cfg *config, ev Event) {
	if _, off := cfg.observer.(discard); off {
		return // WithObserver(nil): nothing to call, nothing to recover
	}
	defer func() { _ = recover() }()
	ev.keys = e.keys
	cfg.observer.Observe(ctx, ev)
}

// storeFailed applies the failure policy to a store error. It reports
// whether the work should run unguarded (fail-open), or returns the error
// to give the caller.
func (e *Engine) storeFailed(ctx context.Context, cfg *config, mode Mode, scope, key, op string, err error) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, fmt.Errorf("idemkit: %s: %w", op, errors.Join(ctxErr, err))
	}
	e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, scope: scope, Err: err})
	if !errors.Is(err, ErrUnavailable) {
		return false, fmt.Errorf("idemkit: %s: %w", op, err)
	}
	if cfg.failure == FailOpen {
		e.observe(ctx, cfg, Event{Kind: EventFailOpen, Mode: mode, Key: key, scope: scope, Err: err})
		return true, nil
	}
	return false, unavailable(op, err)
}

// claim stores value under sk if absent and interprets the store's answer
// for the engine. A write reported with an error (a lost reply, Redis WAIT
// not confirmed by replicas) may have happened: it is undone, best effort,
// before the caller is answered, and reported as EventAmbiguous, so the
// failure policy decides as if nothing was written. An existing entry
// holding this caller's own claim (a client library retried after losing
// the reply) counts as set: claim values carry a unique owner nonce.
//
// A Do claim (ModeDo) looks only at the existing record's value, so when
// the store is a store.SetNXValuer it claims with SetNXValue, which costs
// the backend less (on Redis 7.0, one command instead of a transaction
// that also reads the TTL); the existing entry then has no TTL (zero),
// and inProgress says so. Guard claims keep SetNX: a Guard's answer is
// the window's remaining time.
func (e *Engine) claim(ctx context.Context, cfg *config, mode Mode, scope, key, sk string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	var set bool
	var existing store.Entry
	var err error
	if e.valuer != nil && mode == ModeDo {
		set, existing.Value, err = e.valuer.SetNXValue(ctx, sk, value, ttl)
	} else {
		set, existing, err = e.store.SetNX(ctx, sk, value, ttl)
	}
	switch {
	case err != nil:
		if set || !errors.Is(err, store.ErrInvalid) {
			undone, uerr := e.store.CompareAndDelete(detach(ctx), sk, value)
			if uerr != nil || undone {
				e.observe(ctx, cfg, Event{Kind: EventAmbiguous, Mode: mode, Key: key, scope: scope, Err: errors.Join(err, uerr)})
			}
		}
		return false, store.Entry{}, err
	case !set && bytes.Equal(existing.Value, value):
		return true, store.Entry{}, nil
	}
	return set, existing, nil
}
