package idemfunc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// Func is the shape of the functions Wrap protects.
type Func[Req, Resp any] func(ctx context.Context, req Req) (Resp, error)

// KeyFunc returns the key that identifies a request: a message ID, an event
// ID, a business key. Requests with equal keys run once.
type KeyFunc[Req any] func(req Req) (string, error)

// Option configures Wrap.
type Option[Req any] func(*config[Req])

type config[Req any] struct {
	fingerprint func(Req) (string, error)
	callOpts    []idemkit.Option
}

// WithFingerprint sets how a request's payload is fingerprinted. A repeat
// whose fingerprint differs from the first's fails with
// idemkit.ErrMismatch. By default there is no payload check.
func WithFingerprint[Req any](fp func(Req) (string, error)) Option[Req] {
	return func(c *config[Req]) { c.fingerprint = fp }
}

// WithJSONFingerprint fingerprints the request's whole JSON encoding, in
// canonical form (see package keying).
func WithJSONFingerprint[Req any]() Option[Req] {
	var f keying.Fingerprinter // drops nothing
	return WithFingerprint(func(req Req) (string, error) {
		b, err := json.Marshal(req)
		if err != nil {
			return "", err
		}
		return f.Sum("", "", nil, b), nil
	})
}

// WithCallOptions passes engine options (WithWait, WithRetention,
// WithFailureMode, ...) to every call.
func WithCallOptions[Req any](opts ...idemkit.Option) Option[Req] {
	return func(c *config[Req]) { c.callOpts = append(c.callOpts, opts...) }
}

// Wrap returns fn guarded by e: the first call for a key runs fn and stores
// its result; later calls with the key return the stored result without
// running fn. A concurrent repeat gets idemkit.ErrInProgress unless the
// call options include idemkit.WithWait. A key function error, or an empty
// key, is returned wrapping idemkit.ErrInvalid and fn does not run.
//
// The returned function is safe for concurrent use when fn is.
func Wrap[Req, Resp any](e *idemkit.Engine, key KeyFunc[Req], fn Func[Req, Resp], opts ...Option[Req]) Func[Req, Resp] {
	var cfg config[Req]
	for _, o := range opts {
		o(&cfg)
	}
	return func(ctx context.Context, req Req) (Resp, error) {
		var zero Resp
		k, err := key(req)
		if err != nil {
			return zero, fmt.Errorf("idemfunc: key: %w: %w", idemkit.ErrInvalid, err)
		}
		var fp string
		if cfg.fingerprint != nil {
			if fp, err = cfg.fingerprint(req); err != nil {
				return zero, fmt.Errorf("idemfunc: fingerprint: %w: %w", idemkit.ErrInvalid, err)
			}
		}
		resp, _, err := idemkit.Do(ctx, e, k, fp, func(ctx context.Context) (Resp, error) { return fn(ctx, req) }, cfg.callOpts...)
		return resp, err
	}
}
