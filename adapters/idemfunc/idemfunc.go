package idemfunc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/keying"
)

// keySpace is the first part of every key a wrapper gives the engine, so
// no other adapter's keys (idemhttp, idemgrpc) can meet a wrapper's.
const keySpace = "func"

// MaxNameLen is the longest wrapper name, in bytes.
const MaxNameLen = 64

// Func is the shape of the functions Wrap protects.
type Func[Req, Resp any] func(ctx context.Context, req Req) (Resp, error)

// Idempotent is a function Wrap returns. Besides fn's result and error it
// returns the engine's Result: Replayed says the result (or final error)
// was stored by an earlier call and fn did not run; Unguarded says the
// store failed under idemkit.FailOpen and fn ran unprotected.
type Idempotent[Req, Resp any] func(ctx context.Context, req Req) (Resp, idemkit.Result, error)

// KeyFunc returns the key that identifies a request: a message ID, an event
// ID, a business key. Requests with equal keys run once per wrapper.
type KeyFunc[Req any] func(req Req) (string, error)

// Option configures Wrap.
type Option[Req any] func(*config[Req]) error

type config[Req any] struct {
	fingerprint func(Req) (string, error)
	engineOpts  []idemkit.Option
}

// WithFingerprint sets how a request's payload is fingerprinted: a repeat
// whose fingerprint differs from the first's fails with
// idemkit.ErrMismatch. By default there is no payload check.
func WithFingerprint[Req any](fp func(Req) (string, error)) Option[Req] {
	return func(c *config[Req]) error {
		if fp == nil {
			return errors.New("WithFingerprint(nil): nil fingerprint function")
		}
		c.fingerprint = fp
		return nil
	}
}

// WithJSONFingerprint fingerprints the request's whole JSON encoding
// (encoding/json): a repeat that differs in any encoded field fails with
// idemkit.ErrMismatch.
func WithJSONFingerprint[Req any]() Option[Req] {
	return WithFingerprint(func(req Req) (string, error) {
		b, err := json.Marshal(req)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	})
}

// WithEngineOptions sets the engine options of every call (WithWait,
// WithRetention, WithFailureMode, WithErrorCodec, WithCodec, ...). Wrap
// validates them once.
func WithEngineOptions[Req any](opts ...idemkit.Option) Option[Req] {
	return func(c *config[Req]) error {
		c.engineOpts = append(c.engineOpts, opts...)
		return nil
	}
}

// Wrap returns fn guarded by e: the first call for a key runs fn and stores
// its result (with the engine's Codec, JSON by default); later calls with
// the key return the stored result without running fn. name is the
// wrapper's own key space: wrappers with different names never share a
// key, so two consumers of one event run once each. It must be 1 to
// MaxNameLen bytes of printable ASCII, and stable across deploys.
//
// Wrap returns an error wrapping idemkit.ErrInvalid for a nil engine, key
// function or fn, a bad name or an invalid option. The returned function
// is safe for concurrent use when fn is; see the package doc for its
// errors.
func Wrap[Req, Resp any](e *idemkit.Engine, name string, key KeyFunc[Req], fn Func[Req, Resp], opts ...Option[Req]) (Idempotent[Req, Resp], error) {
	var cfg config[Req]
	errs := []error{checkName(name)}
	if e == nil || key == nil || fn == nil {
		errs = append(errs, fmt.Errorf("idemfunc: %w: nil engine, key function or fn", idemkit.ErrInvalid))
	}
	if err := options.Apply(&cfg, opts); err != nil {
		errs = append(errs, fmt.Errorf("idemfunc: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	view, err := e.With(cfg.engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemfunc: %s: engine options: %w", name, err)
	}
	return func(ctx context.Context, req Req) (Resp, idemkit.Result, error) {
		var zero Resp
		k, err := key(req)
		if err == nil && k == "" {
			err = errors.New("empty key")
		}
		if err != nil {
			return zero, idemkit.Result{}, fmt.Errorf("idemfunc: %s: key: %w: %w", name, idemkit.ErrInvalid, err)
		}
		var fp string
		if cfg.fingerprint != nil {
			if fp, err = cfg.fingerprint(req); err != nil {
				return zero, idemkit.Result{}, fmt.Errorf("idemfunc: %s: fingerprint: %w: %w", name, idemkit.ErrInvalid, err)
			}
		}
		run := func(ctx context.Context) (Resp, error) { return fn(ctx, req) }
		return idemkit.Do(ctx, view, keying.Key(keySpace, name, k), fp, run)
	}, nil
}

// checkName refuses a wrapper name that is empty, too long or not
// printable ASCII.
func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("idemfunc: %w: name must have 1 to %d bytes, got %d", idemkit.ErrInvalid, MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return fmt.Errorf("idemfunc: %w: name %q is not printable ASCII without spaces", idemkit.ErrInvalid, name)
		}
	}
	return nil
}
