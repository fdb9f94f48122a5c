package idemkit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Do runs fn once per key. The first caller claims the key with an
// in-progress record (lease TTL, extended by a heartbeat while fn runs),
// runs fn, and records its result for the retention TTL; every later call
// with the key returns that result with Replayed set, without running fn.
//
// A call while the first still runs gets an error wrapping ErrInProgress (a
// *ConflictError with a retry hint), or with WithWait waits for the result.
// A call whose fingerprint differs from the first's gets ErrMismatch. When
// fn fails, the key is released so a retry runs fn again, unless the
// ErrorCodec (WithErrorCodec) says the error is final: then it is stored
// and replayed like a result.
//
// When fn ran but its result could not be recorded, Do returns fn's value
// in Result.Value together with an error wrapping ErrLeaseLost (another
// caller took the key over) or ErrUnavailable (the store failed).
func (e *Engine) Do(ctx context.Context, key, fingerprint string, fn func(context.Context) ([]byte, error), opts ...Option) (Result, error) {
	cfg, err := e.callConfig(opts)
	if err != nil {
		return Result{}, err
	}
	sk, err := e.storeKey(cfg, spaceDo, key)
	if err != nil {
		return Result{}, err
	}
	now := time.Now().UnixMilli()
	claim := record{state: stateInProgress, owner: e.newNonce(), created: now, updated: now, fingerprint: fingerprint}
	enc := claim.encode()
	delay := cfg.pollInterval
	for {
		set, existing, err := e.claim(ctx, cfg, ModeDo, key, sk, enc, cfg.lease)
		if err != nil {
			return e.unguarded(ctx, cfg, ModeDo, key, "claim", err, fn)
		}
		if set {
			e.observe(ctx, cfg, Event{Kind: EventAdmitted, Mode: ModeDo, Key: key})
			return e.execute(ctx, cfg, ModeDo, key, sk, &claim, enc, fn)
		}
		res, err, again := e.existing(ctx, cfg, ModeDo, key, fingerprint, existing)
		if !again {
			return res, err
		}
		if err := pause(ctx, &delay, cfg.pollInterval); err != nil {
			return Result{}, err
		}
	}
}

// unguarded handles a store failure before fn ran: under fail-open it runs
// fn without protection.
func (e *Engine) unguarded(ctx context.Context, cfg *config, mode Mode, key, op string, err error, fn func(context.Context) ([]byte, error)) (Result, error) {
	run, err := e.storeFailed(ctx, cfg, mode, key, op, err)
	if !run {
		return Result{}, err
	}
	v, err := fn(ctx)
	return Result{Value: v, Unguarded: true}, err
}

// existing decides what a caller gets when the key already holds a record.
// again reports that the caller should wait and try once more.
func (e *Engine) existing(ctx context.Context, cfg *config, mode Mode, key, fingerprint string, ent store.Entry) (res Result, err error, again bool) {
	rec, err := decodeRecord(ent.Value)
	if err != nil {
		e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, Err: err})
		return Result{}, fmt.Errorf("idemkit: record for key digest %s: %w", Event{Key: key}.KeyDigest(), err), false
	}
	if mode == ModeDo && string(rec.fp) != fingerprint {
		e.observe(ctx, cfg, Event{Kind: EventMismatch, Mode: mode, Key: key})
		return Result{}, ErrMismatch, false
	}
	switch rec.state {
	case stateDone:
		e.observe(ctx, cfg, Event{Kind: EventReplayed, Mode: mode, Key: key})
		return Result{Value: rec.payload, Replayed: true}, nil, false
	case stateFailed:
		e.observe(ctx, cfg, Event{Kind: EventReplayed, Mode: mode, Key: key})
		return Result{Replayed: true}, decodeFinal(cfg, rec.payload), false
	case stateSpent:
		e.observe(ctx, cfg, Event{Kind: EventTokenInvalid, Mode: mode, Key: key, Err: ErrTokenUsed})
		return Result{}, ErrTokenUsed, false
	case stateIssued:
		if mode != ModeToken {
			err := fmt.Errorf("%w: unused-token record under an idempotency key", store.ErrCorrupt)
			e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, Err: err})
			return Result{}, fmt.Errorf("idemkit: record for key digest %s: %w", Event{Key: key}.KeyDigest(), err), false
		}
		return Result{}, nil, true // a token restored meanwhile: claim again
	}
	if cfg.wait {
		return Result{}, nil, true
	}
	retry := min(max(ent.TTL, time.Millisecond), cfg.retryHint)
	e.observe(ctx, cfg, Event{Kind: EventInProgress, Mode: mode, Key: key, RetryAfter: retry})
	return Result{}, &ConflictError{Err: ErrInProgress, RetryAfter: retry}, false
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

// execute runs fn under a claim this caller holds and records the outcome.
func (e *Engine) execute(ctx context.Context, cfg *config, mode Mode, key, sk string, claim *record, enc []byte, fn func(context.Context) ([]byte, error)) (Result, error) {
	hb := e.startHeartbeat(ctx, cfg, sk, enc)
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			hb.stop()
			e.releaseClaim(ctx, cfg, mode, key, sk, claim, enc)
		}
	}()
	v, err := fn(ctx)
	returned = true
	hb.stop()
	if err != nil {
		if cfg.errorCodec != nil {
			if data, final := cfg.errorCodec.EncodeError(err); final {
				if rerr := e.complete(ctx, cfg, mode, key, sk, claim, enc, stateFailed, data); rerr != nil {
					return Result{}, errors.Join(err, rerr)
				}
				return Result{}, err
			}
		}
		e.releaseClaim(ctx, cfg, mode, key, sk, claim, enc)
		return Result{}, err
	}
	if len(v) > cfg.maxResult || claim.encodedLen(len(v)) > store.MaxValueLen {
		e.releaseClaim(ctx, cfg, mode, key, sk, claim, enc)
		e.observe(ctx, cfg, Event{Kind: EventTooLarge, Mode: mode, Key: key})
		return Result{}, fmt.Errorf("%w: %d bytes, cap %d", ErrResultTooLarge, len(v), cfg.maxResult)
	}
	return Result{Value: v}, e.complete(ctx, cfg, mode, key, sk, claim, enc, stateDone, v)
}

// complete swaps this caller's in-progress record for the final one.
func (e *Engine) complete(ctx context.Context, cfg *config, mode Mode, key, sk string, claim *record, enc []byte, state byte, payload []byte) error {
	done := *claim
	done.state = state
	done.updated = time.Now().UnixMilli()
	done.payload = payload
	ok, err := e.store.CompareAndSwap(detach(ctx), sk, enc, done.encode(), cfg.retention)
	if err != nil {
		e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, Err: err})
		if !errors.Is(err, ErrUnavailable) {
			e.releaseClaim(ctx, cfg, mode, key, sk, claim, enc)
			return fmt.Errorf("idemkit: record result: %w", err)
		}
		return unavailable("record result", err)
	}
	if !ok {
		e.observe(ctx, cfg, Event{Kind: EventLeaseLost, Mode: mode, Key: key, Err: ErrLeaseLost})
		return ErrLeaseLost
	}
	return nil
}

// releaseClaim undoes a claim after a failure that is not final: an
// idempotency key is deleted so a retry runs again; a token is marked spent.
func (e *Engine) releaseClaim(ctx context.Context, cfg *config, mode Mode, key, sk string, claim *record, enc []byte) {
	bg := detach(ctx)
	var ok bool
	var err error
	if mode == ModeToken {
		spent := *claim
		spent.state = stateSpent
		spent.updated = time.Now().UnixMilli()
		ok, err = e.store.CompareAndSwap(bg, sk, enc, spent.encode(), cfg.tokenTTL)
	} else {
		ok, err = e.store.CompareAndDelete(bg, sk, enc)
	}
	switch {
	case err != nil:
		e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, Err: fmt.Errorf("release: %w", err)})
	case !ok:
		e.observe(ctx, cfg, Event{Kind: EventLeaseLost, Mode: mode, Key: key, Err: ErrLeaseLost})
	default:
		e.observe(ctx, cfg, Event{Kind: EventReleased, Mode: mode, Key: key})
	}
}
