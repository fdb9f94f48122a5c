package idemkit

import (
	"context"
	"fmt"
	"time"
)

// Guard admits the first request with a given key (typically a request
// fingerprint from package keying) inside the window, runs fn, and returns
// its error. A repeat inside the window gets an error wrapping ErrDuplicate,
// a *ConflictError whose RetryAfter is the window's remaining time, and fn
// does not run. What happens to the claim after fn is set by WithRelease;
// a release only ever deletes the claim this call made.
func (e *Engine) Guard(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) (err error) {
	cfg, scope, err := e.callConfigFor("Guard", guardOpts, opts)
	if err != nil {
		return err
	}
	ctx, end := trace(ctx, cfg, ModeGuard, "Guard")
	defer func() { endTrace(end, err) }()
	sk, err := e.storeKey(cfg, scope, spaceGuard, key)
	if err != nil {
		return err
	}
	claim := guardClaim(e.newNonce(), cfg.release)
	set, existing, err := e.claim(ctx, cfg, ModeGuard, scope, key, sk, claim, cfg.window)
	if err != nil {
		unguarded, err := e.storeFailed(ctx, cfg, ModeGuard, scope, key, "guard", err)
		if !unguarded {
			return err
		}
		return fn(ctx)
	}
	if !set {
		retry := max(existing.TTL, time.Millisecond)
		e.observe(ctx, cfg, Event{Kind: EventDuplicate, Mode: ModeGuard, Key: key, scope: scope, RetryAfter: retry})
		return &ConflictError{Err: ErrDuplicate, RetryAfter: retry}
	}
	e.observe(ctx, cfg, Event{Kind: EventAdmitted, Mode: ModeGuard, Key: key, scope: scope})
	return e.runGuarded(ctx, cfg, scope, key, sk, claim, fn)
}

// Guard claims are a flag byte and the owner nonce. The flag tells a near
// cache whether the claim can be released before it expires.
const (
	guardKept       byte = 'K'
	guardReleasable byte = 'R'
	guardClaimLen        = 1 + len(nonce{})
)

func guardClaim(owner nonce, r Release) []byte {
	b := make([]byte, guardClaimLen)
	b[0] = guardReleasable
	if r == KeepUntilExpiry {
		b[0] = guardKept
	}
	copy(b[1:], owner[:])
	return b
}

func isGuardClaim(value []byte) bool {
	return len(value) == guardClaimLen && (value[0] == guardKept || value[0] == guardReleasable)
}

// runGuarded runs fn under an admitted Guard claim and applies the release
// behaviour, also when fn panics.
func (e *Engine) runGuarded(ctx context.Context, cfg *config, scope, key, sk string, owner []byte, fn func(context.Context) error) (err error) {
	if cfg.release == KeepUntilExpiry {
		return fn(ctx)
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			e.releaseGuard(ctx, cfg, scope, key, sk, owner)
		}
	}()
	err = fn(ctx)
	returned = true
	if err != nil || cfg.release == ReleaseOnDone {
		e.releaseGuard(ctx, cfg, scope, key, sk, owner)
	}
	return err
}

func (e *Engine) releaseGuard(ctx context.Context, cfg *config, scope, key, sk string, owner []byte) {
	ok, err := e.store.CompareAndDelete(detach(ctx), sk, owner)
	switch {
	case err != nil:
		e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: ModeGuard, Key: key, scope: scope, Err: fmt.Errorf("release: %w", err)})
	case ok:
		e.observe(ctx, cfg, Event{Kind: EventReleased, Mode: ModeGuard, Key: key, scope: scope})
	}
}
