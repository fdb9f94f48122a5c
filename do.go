package idemkit

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Do runs fn once per key: the first caller claims the key, runs fn and
// records its result; every later call with the key returns that result
// with Replayed set, without running fn. A call while the first still runs
// gets an error wrapping ErrInProgress (a *ConflictError with a retry
// hint), or with WithWait waits for the result; a call whose fingerprint
// differs from the first's gets ErrMismatch. When fn fails, the key is
// released so a retry runs fn again, unless the ErrorCodec (WithErrorCodec)
// says the error is final: then it is stored and replayed like a result.
//
// fn's context carries the claim (ClaimFromContext). With a heartbeat it
// is cancelled with cause ErrLeaseLost (context.Cause) when the lease is
// lost or cannot be confirmed before it ends, and it is cancelled when fn
// returns; fn should stop when it is done.
//
// When fn ran but its result was not recorded, Do returns fn's value in
// Result.Value with an error wrapping ErrResultTooLarge (over the size
// cap), ErrLeaseLost (another caller took the key over, or the lease was
// lost while fn ran: then fn's own error, unless it is its context's
// cancellation or wraps ErrLeaseLost, is joined to it) or ErrUnavailable
// (the store failed). See the package documentation, section "Leases and
// oversized results".
func (e *Engine) Do(ctx context.Context, key, fingerprint string, fn func(context.Context) ([]byte, error), opts ...Option) (_ Result, err error) {
	cfg, scope, err := e.callConfigFor("Do", doOpts, opts)
	if err != nil {
		return Result{}, err
	}
	ctx, end := trace(ctx, cfg, ModeDo, "Do")
	defer func() { endTrace(end, err) }()
	sk, err := e.storeKey(cfg, scope, spaceDo, key)
	if err != nil {
		return Result{}, err
	}
	c, res, err := e.begin(ctx, cfg, scope, key, sk, e.keys.storedFingerprint(fingerprint))
	if c == nil {
		if err == nil && res.Unguarded {
			v, err := fn(ctx)
			return Result{Value: v, Unguarded: true}, err
		}
		return res, err
	}
	return c.run(ctx, fn)
}

// begin claims sk for Do, waiting with WithWait, and reports the outcome
// for Begin: a claim, or no claim and what the caller gets instead.
func (e *Engine) begin(ctx context.Context, cfg *config, scope, key, sk, fingerprint string) (*Claim, Result, error) {
	// The Claim itself is made only when the key is won: a replay, the
	// common outcome of a retry, allocates none.
	tail := e.doTail(cfg)
	rec, enc := e.claimRecord(cfg, fingerprint, tail)
	delay := cfg.pollInterval
	for {
		set, existing, err := e.claim(ctx, cfg, ModeDo, scope, key, sk, enc, e.claimTTL(cfg, tail))
		if err == nil && !set {
			// A released claim, or one whose lease has ended: take it over.
			var taken []byte
			var retry bool
			taken, retry, err = e.takeover(ctx, cfg, ModeDo, scope, key, sk, &existing, &rec)
			if retry {
				rec, enc = e.claimRecord(cfg, fingerprint, tail)
				continue
			}
			if taken != nil {
				set, enc = true, taken
			}
		}
		if err != nil {
			run, err := e.storeFailed(ctx, cfg, ModeDo, scope, key, "claim", err)
			return nil, Result{Unguarded: run}, err
		}
		if set {
			c := e.claimOf(cfg, ModeDo, scope, key, sk, rec, enc)
			c.admit(ctx)
			return c, Result{}, nil
		}
		res, err, again := e.existing(ctx, cfg, ModeDo, scope, key, fingerprint, existing)
		if !again {
			return nil, res, err
		}
		if err := pause(ctx, &delay, cfg.pollInterval); err != nil {
			return nil, Result{}, err
		}
		rec, enc = e.claimRecord(cfg, fingerprint, tail) // stamped when it is claimed, not when the wait began
	}
}

// unguarded handles a store failure before fn ran: under fail-open it runs
// fn without protection.
func (e *Engine) unguarded(ctx context.Context, cfg *config, mode Mode, scope, key, op string, err error, fn func(context.Context) ([]byte, error)) (Result, error) {
	run, err := e.storeFailed(ctx, cfg, mode, scope, key, op, err)
	if !run {
		return Result{}, err
	}
	v, err := fn(ctx)
	return Result{Value: v, Unguarded: true}, err
}

// existing decides what a caller gets when the key already holds a record.
// again reports that the caller should wait and try once more.
func (e *Engine) existing(ctx context.Context, cfg *config, mode Mode, scope, key, fingerprint string, ent store.Entry) (res Result, err error, again bool) {
	rec, err := decodeRecord(ent.Value)
	if err != nil {
		e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, scope: scope, Err: err})
		return Result{}, fmt.Errorf("idemkit: record for key digest %s: %w", e.keys.logDigest(scope, key), err), false
	}
	if mode == ModeDo && string(rec.fp) != fingerprint {
		e.observe(ctx, cfg, Event{Kind: EventMismatch, Mode: mode, Key: key, scope: scope})
		return Result{}, ErrMismatch, false
	}
	switch rec.state {
	case stateDone:
		e.observe(ctx, cfg, Event{Kind: EventReplayed, Mode: mode, Key: key, scope: scope})
		return Result{Value: rec.payload, Replayed: true}, nil, false
	case stateFailed:
		e.observe(ctx, cfg, Event{Kind: EventReplayed, Mode: mode, Key: key, scope: scope})
		return Result{Replayed: true}, decodeFinal(cfg, rec.payload), false
	case stateTooLarge:
		e.observe(ctx, cfg, Event{Kind: EventReplayed, Mode: mode, Key: key, scope: scope})
		return Result{Replayed: true}, tooLargeReplay(rec.payload), false
	case stateSpent:
		e.observe(ctx, cfg, Event{Kind: EventTokenInvalid, Mode: mode, Key: key, scope: scope, Err: ErrTokenUsed})
		return Result{}, ErrTokenUsed, false
	case stateReleased:
		return Result{}, nil, true // taken over by the caller's next claim
	case stateIssued:
		if mode != ModeToken {
			err := fmt.Errorf("%w: unused-token record under an idempotency key", store.ErrCorrupt)
			e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, scope: scope, Err: err})
			return Result{}, fmt.Errorf("idemkit: record for key digest %s: %w", e.keys.logDigest(scope, key), err), false
		}
		return Result{}, nil, true // a token restored meanwhile: claim again
	}
	if cfg.wait {
		return Result{}, nil, true
	}
	if ent.TTL > 0 { // what is left of the lease, before the tail (see fence.go)
		ent.TTL = max(ent.TTL-time.Duration(rec.tail)*time.Millisecond, time.Millisecond)
	}
	return Result{}, e.inProgress(ctx, cfg, scope, key, ent, mode), false
}

// inProgress reports a repeat that found the first execution running. The
// retry hint is the retry-hint cap, or less when the record's lease ends
// sooner. An entry read without its TTL (zero: claimed through
// store.SetNXValuer, see claim) gets the cap, bounded by this call's
// lease, which a running execution's heartbeat keeps renewing.
func (e *Engine) inProgress(ctx context.Context, cfg *config, scope, key string, ent store.Entry, mode Mode) error {
	retry := min(max(ent.TTL, time.Millisecond), cfg.retryHint)
	if ent.TTL == 0 {
		retry = min(cfg.retryHint, cfg.lease)
	}
	e.observe(ctx, cfg, Event{Kind: EventInProgress, Mode: mode, Key: key, scope: scope, RetryAfter: retry})
	return &ConflictError{Err: ErrInProgress, RetryAfter: retry}
}

func decodeFinal(cfg *config, payload []byte) error {
	if cfg.errorCodec == nil {
		return &ReplayedError{Message: string(payload)}
	}
	return cfg.errorCodec.DecodeError(payload)
}

// pause waits *delay (bounded by ctx) and doubles it, up to ten times base.
func pause(ctx context.Context, delay *time.Duration, base time.Duration) error {
	t := time.NewTimer(*delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("idemkit: waiting for the first execution: %w", ctx.Err())
	case <-t.C:
	}
	*delay = min(*delay*2, base*10)
	return nil
}
