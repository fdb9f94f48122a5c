package idemkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/idemkit/idemkit/keying"
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
	cfg      config
	prefix   [3]string // per key space, see storeKey
	instance [8]byte
}

// Result is the outcome of Do or UseToken.
type Result struct {
	// Value is fn's result, or the stored result of an earlier execution.
	Value []byte
	// Replayed is true when Value (or the returned final error) comes from
	// an earlier execution and fn did not run.
	Replayed bool
	// Unguarded is true when the store failed, the engine runs fail-open,
	// and fn ran without protection.
	Unguarded bool
}

// Token is a one-time token issued by IssueToken.
type Token struct {
	// Value is the token text, URL-safe, to hand to the client.
	Value string
	// ExpiresIn is the token's lifetime.
	ExpiresIn time.Duration
}

// ErrTokenUsed reports a token that was already used and whose first use
// recorded no result (its work failed). It wraps ErrTokenInvalid.
var ErrTokenUsed = fmt.Errorf("%w: already used", ErrTokenInvalid)

const (
	spaceGuard = iota
	spaceDo
	spaceToken
)

// maxRawKey is the longest caller key stored as given; longer keys are
// replaced by their SHA-256 digest in a separate key space.
const maxRawKey = 256

// New returns an Engine over s. Options set engine-wide defaults; most of
// them can also be passed to a single call. It returns an error wrapping
// ErrInvalid for a nil store or an invalid option.
func New(s store.Store, opts ...Option) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("idemkit: %w", cfg.err)
	}
	e := &Engine{store: s, cfg: cfg}
	for i, space := range []string{"g", "i", "t"} {
		e.prefix[i] = cfg.namespace + ":" + space + ":"
	}
	if _, err := rand.Read(e.instance[:]); err != nil {
		return nil, fmt.Errorf("idemkit: instance id: %w", err)
	}
	return e, nil
}

// Store returns the store the engine works on.
func (e *Engine) Store() store.Store { return e.store }

// callConfig returns the engine's config with per-call options applied.
// Without options it is the engine's own config, which must not be changed.
func (e *Engine) callConfig(opts []Option) (*config, error) {
	if len(opts) == 0 {
		return &e.cfg, nil
	}
	cfg := new(config)
	*cfg = e.cfg
	for _, o := range opts {
		o(cfg)
	}
	if cfg.err == nil && cfg.namespace != e.cfg.namespace {
		cfg.invalid("the namespace is set per engine, not per call")
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("idemkit: %w", cfg.err)
	}
	return cfg, nil
}

// CheckOptions reports, as an error wrapping ErrInvalid, the first option
// that a call (Guard, Do, IssueToken, UseToken) given opts would reject.
// Adapters use it to refuse bad per-route options when they are built
// instead of on every request.
func CheckOptions(opts ...Option) error {
	base := defaultConfig()
	cfg := base
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err == nil && cfg.namespace != base.namespace {
		cfg.invalid("the namespace is set per engine, not per call")
	}
	if cfg.err != nil {
		return fmt.Errorf("idemkit: %w", cfg.err)
	}
	return nil
}

// storeKey maps a caller's key into one of the engine's key spaces. Keys
// longer than maxRawKey are hashed into a space of their own (upper-case
// letter), so a digest can never equal a raw key.
func (e *Engine) storeKey(space int, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("idemkit: %w: empty key", ErrInvalid)
	}
	if len(key) <= maxRawKey {
		return e.prefix[space] + key, nil
	}
	sum := sha256.Sum256([]byte(key))
	p := e.prefix[space]
	upper := p[:len(p)-2] + string(p[len(p)-2]-'a'+'A') + ":"
	return upper + base64.RawURLEncoding.EncodeToString(sum[:]), nil
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

func (e *Engine) observe(ctx context.Context, cfg *config, ev Event) {
	cfg.observer.Observe(ctx, ev)
}

// storeFailed applies the failure policy to a store error. It reports
// whether the work should run unguarded (fail-open), or returns the error
// to give the caller.
func (e *Engine) storeFailed(ctx context.Context, cfg *config, mode Mode, key, op string, err error) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, fmt.Errorf("idemkit: %s: %w", op, errors.Join(ctxErr, err))
	}
	e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: mode, Key: key, Err: err})
	if !errors.Is(err, ErrUnavailable) {
		return false, fmt.Errorf("idemkit: %s: %w", op, err)
	}
	if cfg.failure == FailOpen {
		e.observe(ctx, cfg, Event{Kind: EventFailOpen, Mode: mode, Key: key, Err: err})
		return true, nil
	}
	return false, unavailable(op, err)
}

// Guard admits the first request with a given key (typically a request
// fingerprint from package keying) inside the window, runs fn, and returns
// its error. A repeat inside the window gets an error wrapping ErrDuplicate,
// a *ConflictError whose RetryAfter is the window's remaining time, and fn
// does not run. What happens to the claim after fn is set by WithRelease;
// a release only ever deletes the claim this call made.
func (e *Engine) Guard(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	cfg, err := e.callConfig(opts)
	if err != nil {
		return err
	}
	sk, err := e.storeKey(spaceGuard, key)
	if err != nil {
		return err
	}
	claim := guardClaim(e.newNonce(), cfg.release)
	set, existing, err := e.claim(ctx, sk, claim, cfg.window)
	if err != nil {
		unguarded, err := e.storeFailed(ctx, cfg, ModeGuard, key, "guard", err)
		if !unguarded {
			return err
		}
		return fn(ctx)
	}
	if !set {
		retry := max(existing.TTL, time.Millisecond)
		e.observe(ctx, cfg, Event{Kind: EventDuplicate, Mode: ModeGuard, Key: key, RetryAfter: retry})
		return &ConflictError{Err: ErrDuplicate, RetryAfter: retry}
	}
	e.observe(ctx, cfg, Event{Kind: EventAdmitted, Mode: ModeGuard, Key: key})
	return e.runGuarded(ctx, cfg, key, sk, claim, fn)
}

// claim stores value under sk if absent and interprets the store's answer
// for the engine. A write reported with an error (Redis WAIT not confirmed
// by replicas, say) is undone, best effort, so the failure policy decides
// as if nothing was written. An existing entry holding this caller's own
// claim (a client library retried after losing the reply) counts as set:
// claim values carry a unique owner nonce.
func (e *Engine) claim(ctx context.Context, sk string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	set, existing, err := e.store.SetNX(ctx, sk, value, ttl)
	switch {
	case err != nil:
		// Unless the store refused the arguments, the write may have
		// happened (set, or a lost reply): undo our own, unique claim.
		if set || !errors.Is(err, store.ErrInvalid) {
			_, _ = e.store.CompareAndDelete(detach(ctx), sk, value)
		}
		return false, store.Entry{}, err
	case !set && bytes.Equal(existing.Value, value):
		return true, store.Entry{}, nil
	}
	return set, existing, nil
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

// Settled reports whether a value the engine stored can no longer change
// before it expires: a completed result (success or final error) or a Guard
// claim kept until its window ends. An in-progress record, an unused token
// or a releasable claim is not settled. Caches in front of a store (see
// policy.NearCache) may keep settled values until their TTL runs out.
func Settled(value []byte) bool {
	if len(value) == guardClaimLen && (value[0] == guardKept || value[0] == guardReleasable) {
		return value[0] == guardKept
	}
	r, err := decodeRecord(value)
	return err == nil && (r.state == stateDone || r.state == stateFailed)
}

// runGuarded runs fn under an admitted Guard claim and applies the release
// behaviour, also when fn panics.
func (e *Engine) runGuarded(ctx context.Context, cfg *config, key, sk string, owner []byte, fn func(context.Context) error) (err error) {
	if cfg.release == KeepUntilExpiry {
		return fn(ctx)
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			e.releaseGuard(ctx, cfg, key, sk, owner)
		}
	}()
	err = fn(ctx)
	returned = true
	if err != nil || cfg.release == ReleaseOnDone {
		e.releaseGuard(ctx, cfg, key, sk, owner)
	}
	return err
}

func (e *Engine) releaseGuard(ctx context.Context, cfg *config, key, sk string, owner []byte) {
	ok, err := e.store.CompareAndDelete(detach(ctx), sk, owner)
	switch {
	case err != nil:
		e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: ModeGuard, Key: key, Err: fmt.Errorf("release: %w", err)})
	case ok:
		e.observe(ctx, cfg, Event{Kind: EventReleased, Mode: ModeGuard, Key: key})
	}
}

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
	sk, err := e.storeKey(spaceDo, key)
	if err != nil {
		return Result{}, err
	}
	now := time.Now().UnixMilli()
	claim := record{state: stateInProgress, owner: e.newNonce(), created: now, updated: now, fingerprint: fingerprint}
	enc := claim.encode()
	delay := cfg.pollInterval
	for {
		set, existing, err := e.claim(ctx, sk, enc, cfg.lease)
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

// heartbeat extends a running claim's lease until stopped or lost. stop
// waits for a beat already under way, so no store call outlives the Do
// that started it.
type heartbeat struct {
	mu       sync.Mutex
	timer    *time.Timer
	stopped  bool
	inflight sync.WaitGroup
}

func (e *Engine) startHeartbeat(ctx context.Context, cfg *config, sk string, enc []byte) *heartbeat {
	every := cfg.heartbeat
	if every == 0 || every >= cfg.lease {
		every = cfg.lease / 3 // a beat must come before the lease ends
	}
	if every <= 0 {
		return nil
	}
	h := &heartbeat{}
	bg := detach(ctx)
	lease := cfg.lease
	var beat func()
	beat = func() {
		if !h.begin() {
			return
		}
		defer h.inflight.Done()
		ok, err := e.store.CompareAndSwap(bg, sk, enc, enc, lease)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped || (err == nil && !ok) {
			return // done, or the lease is lost: complete reports it
		}
		h.timer.Reset(every)
	}
	h.mu.Lock()
	h.timer = time.AfterFunc(every, beat)
	h.mu.Unlock()
	return h
}

// begin registers a beat unless the heartbeat was stopped.
func (h *heartbeat) begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.inflight.Add(1)
	return true
}

func (h *heartbeat) stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
	h.inflight.Wait()
}

// IssueToken stores a fresh one-time token for principal, valid for the
// token TTL (WithTokenTTL). The token can be used once, by the same
// principal, with UseToken. Issuing needs the store whatever the failure
// mode: a store failure returns an error wrapping ErrUnavailable.
func (e *Engine) IssueToken(ctx context.Context, principal string, opts ...Option) (Token, error) {
	cfg, err := e.callConfig(opts)
	if err != nil {
		return Token{}, err
	}
	for range 3 {
		tok, err := keying.NewToken()
		if err != nil {
			return Token{}, fmt.Errorf("idemkit: token: %w", err)
		}
		set, _, err := e.store.SetNX(ctx, e.tokenKey(principal, tok), issuedToken, cfg.tokenTTL)
		if err != nil {
			e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: ModeToken, Key: tok, Err: err})
			return Token{}, unavailable("issue token", err)
		}
		if set {
			e.observe(ctx, cfg, Event{Kind: EventTokenIssued, Mode: ModeToken, Key: tok})
			return Token{Value: tok, ExpiresIn: cfg.tokenTTL}, nil
		}
	}
	return Token{}, errors.New("idemkit: token collision three times in a row; the random source is broken")
}

func (e *Engine) tokenKey(principal, token string) string {
	return e.prefix[spaceToken] + keying.Key(principal, token)
}

// validTokenText reports whether s can be a token NewToken made: URL-safe
// base64 of sensible length. Anything else is refused without a store call.
func validTokenText(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// UseToken spends token, which must have been issued to principal, and runs
// fn. The claim is atomic: of concurrent uses exactly one runs fn; the
// others get ErrInProgress (or wait, with WithWait). Once fn succeeded,
// every reuse gets its stored result with Replayed set. When fn fails with
// a non-final error the token is spent and a reuse gets ErrTokenUsed.
// Unknown, expired, forged or other principals' tokens get ErrTokenInvalid
// and change nothing.
func (e *Engine) UseToken(ctx context.Context, principal, token string, fn func(context.Context) ([]byte, error), opts ...Option) (Result, error) {
	cfg, err := e.callConfig(opts)
	if err != nil {
		return Result{}, err
	}
	if !validTokenText(token) {
		e.observe(ctx, cfg, Event{Kind: EventTokenInvalid, Mode: ModeToken, Key: token})
		return Result{}, fmt.Errorf("%w: malformed token", ErrTokenInvalid)
	}
	sk := e.tokenKey(principal, token)
	now := time.Now().UnixMilli()
	claim := record{state: stateInProgress, owner: e.newNonce(), created: now, updated: now}
	enc := claim.encode()
	delay := cfg.pollInterval
	for {
		ok, err := e.store.CompareAndSwap(ctx, sk, issuedToken, enc, cfg.lease)
		if err != nil {
			if ok { // applied but reported as failed: put the token back
				_, _ = e.store.CompareAndSwap(detach(ctx), sk, enc, issuedToken, cfg.tokenTTL)
			}
			return e.unguarded(ctx, cfg, ModeToken, token, "use token", err, fn)
		}
		if ok {
			e.observe(ctx, cfg, Event{Kind: EventAdmitted, Mode: ModeToken, Key: token})
			return e.execute(ctx, cfg, ModeToken, token, sk, &claim, enc, fn)
		}
		ent, err := e.store.Get(ctx, sk)
		if errors.Is(err, store.ErrNotFound) {
			e.observe(ctx, cfg, Event{Kind: EventTokenInvalid, Mode: ModeToken, Key: token})
			return Result{}, fmt.Errorf("%w: unknown or expired", ErrTokenInvalid)
		}
		if err != nil {
			return e.unguarded(ctx, cfg, ModeToken, token, "use token", err, fn)
		}
		res, err, again := e.existing(ctx, cfg, ModeToken, token, "", ent)
		if !again {
			return res, err
		}
		if err := pause(ctx, &delay, cfg.pollInterval); err != nil {
			return Result{}, err
		}
	}
}
