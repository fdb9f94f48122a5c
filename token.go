package idemkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store"
)

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

// IssueToken stores a fresh one-time token for principal, valid for the
// token TTL (WithTokenTTL). The token can be used once, by the same
// principal, with UseToken. Issuing needs the store whatever the failure
// mode: a store failure returns an error wrapping ErrUnavailable.
func (e *Engine) IssueToken(ctx context.Context, principal string, opts ...Option) (_ Token, err error) {
	cfg, _, err := e.callConfigFor("IssueToken", issueTokenOpts, opts)
	if err != nil {
		return Token{}, err
	}
	ctx, end := trace(ctx, cfg, ModeToken, "IssueToken")
	defer func() { endTrace(end, err) }()
	for range 3 {
		tok, err := keying.NewToken()
		if err != nil {
			return Token{}, fmt.Errorf("idemkit: token: %w", err)
		}
		set, _, err := e.store.SetNX(ctx, e.tokenKey(cfg, principal, tok), issuedToken, cfg.tokenTTL)
		if err != nil {
			e.observe(ctx, cfg, Event{Kind: EventStoreError, Mode: ModeToken, Key: tok, scope: principal, Err: err})
			return Token{}, unavailable("issue token", err)
		}
		if set {
			e.observe(ctx, cfg, Event{Kind: EventTokenIssued, Mode: ModeToken, Key: tok, scope: principal})
			return Token{Value: tok, ExpiresIn: cfg.tokenTTL}, nil
		}
	}
	return Token{}, errors.New("idemkit: token collision three times in a row; the random source is broken")
}

// tokenKey is where a token issued to principal lives: the principal is
// the token's scope, and neither is readable in the key (unless
// WithReadableKeys).
func (e *Engine) tokenKey(cfg *config, principal, token string) string {
	return e.composeKey(cfg, spaceToken, principal, token)
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
// a non-final error the token is spent and a reuse gets ErrTokenUsed. When
// fn's result is over the size cap, a reuse gets an error wrapping
// ErrResultTooLarge (or ErrTokenUsed under ReleaseKey; see WithOversized).
// Unknown, expired, forged or other principals' tokens get ErrTokenInvalid
// and change nothing.
func (e *Engine) UseToken(ctx context.Context, principal, token string, fn func(context.Context) ([]byte, error), opts ...Option) (_ Result, err error) {
	cfg, _, err := e.callConfigFor("UseToken", useTokenOpts, opts)
	if err != nil {
		return Result{}, err
	}
	ctx, end := trace(ctx, cfg, ModeToken, "UseToken")
	defer func() { endTrace(end, err) }()
	if !validTokenText(token) {
		e.observe(ctx, cfg, Event{Kind: EventTokenInvalid, Mode: ModeToken, Key: token, scope: principal})
		return Result{}, fmt.Errorf("%w: malformed token", ErrTokenInvalid)
	}
	sk := e.tokenKey(cfg, principal, token)
	rec, enc := e.claimRecord(cfg, "", 0) // the Claim is made only when the token is won; a token is never taken over
	delay := cfg.pollInterval
	for {
		ok, err := e.store.CompareAndSwap(ctx, sk, issuedToken, enc, e.claimTTL(cfg, 0))
		if err != nil {
			// The swap may have landed (a lost reply reports ok == false):
			// put the token back if it holds our unique claim.
			if !errors.Is(err, store.ErrInvalid) {
				if undone, uerr := e.store.CompareAndSwap(detach(ctx), sk, enc, issuedToken, cfg.tokenTTL); undone || uerr != nil {
					e.observe(ctx, cfg, Event{Kind: EventAmbiguous, Mode: ModeToken, Key: token, scope: principal, Err: errors.Join(err, uerr)})
				}
			}
			return e.unguarded(ctx, cfg, ModeToken, principal, token, "use token", err, fn)
		}
		if ok {
			return e.runToken(ctx, cfg, principal, token, sk, rec, enc, fn)
		}
		ent, err := e.store.Get(ctx, sk)
		if errors.Is(err, store.ErrNotFound) {
			e.observe(ctx, cfg, Event{Kind: EventTokenInvalid, Mode: ModeToken, Key: token, scope: principal})
			return Result{}, fmt.Errorf("%w: unknown or expired", ErrTokenInvalid)
		}
		if err != nil {
			return e.unguarded(ctx, cfg, ModeToken, principal, token, "use token", err, fn)
		}
		if bytes.Equal(ent.Value, enc) {
			// Our own claim: the swap landed but was reported as not
			// applied (a client library retried it after losing the reply).
			return e.runToken(ctx, cfg, principal, token, sk, rec, enc, fn)
		}
		res, err, again := e.existing(ctx, cfg, ModeToken, principal, token, "", ent)
		if !again {
			return res, err
		}
		if err := pause(ctx, &delay, cfg.pollInterval); err != nil {
			return Result{}, err
		}
	}
}

// runToken runs fn under the token claim that wrote rec, encoded as enc.
func (e *Engine) runToken(ctx context.Context, cfg *config, principal, token, sk string, rec record, enc []byte, fn func(context.Context) ([]byte, error)) (Result, error) {
	c := e.claimOf(cfg, ModeToken, principal, token, sk, rec, enc)
	c.admit(ctx)
	return c.run(ctx, fn)
}
