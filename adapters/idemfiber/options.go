package idemfiber

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Option configures the middleware New returns. New refuses an invalid
// value, a nil function or logger and a nil Option with an error wrapping
// idemkit.ErrInvalid: nothing is clamped or ignored.
type Option func(*config) error

// PrincipalFunc identifies the caller of a request: a user, tenant or
// client id. An error answers 401. The principal scopes the key and is
// never written to responses, logs or store key names. It may alias the
// request's memory (c.Get without Fiber's Immutable): the middleware keeps
// only a copy.
type PrincipalFunc func(c fiber.Ctx) (string, error)

type config struct {
	principal     PrincipalFunc
	keyHeader     string
	methods       []string
	optionalKey   bool
	replayHeaders []string
	storePolicy   func(status int) bool
	maxStored     int
	volatile      []string
	include       []string
	keyFrom       *KeySource // WithKeyFrom's source, or nil for the key header
	keyHeaderSet  bool
	storeSet      bool
	callback      bool
	engineOpts    []idemkit.Option
	logger        *slog.Logger
}

// DefaultMaxStoredResponse is the largest response body, in bytes, that is
// stored by default; see WithMaxStoredResponse.
const DefaultMaxStoredResponse = httpcore.DefaultMaxStoredResponse

// WithPrincipal sets the function that identifies the caller. Required.
func WithPrincipal(fn PrincipalFunc) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithPrincipal: nil principal function")
		}
		c.principal = fn
		return nil
	}
}

// errNoPrincipal is what TrustedHeaderPrincipal returns for a request
// whose header is absent, empty or repeated.
var errNoPrincipal = errors.New("idemfiber: principal header absent, empty or repeated")

// TrustedHeaderPrincipal reads the principal from header name, as set by
// a gateway that authenticated the caller. Only safe when the gateway
// strips the header from what clients send. A request with the header
// absent, empty or repeated (a copy the gateway did not strip) has no
// principal: 401, as idemhttp answers.
func TrustedHeaderPrincipal(name string) PrincipalFunc {
	return func(c fiber.Ctx) (string, error) {
		vs := c.Request().Header.PeekAll(name)
		if len(vs) != 1 || len(vs[0]) == 0 {
			return "", errNoPrincipal
		}
		return string(vs[0]), nil
	}
}

// WithKeyHeader sets the request header carrying the key (default
// Idempotency-Key).
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if !httpcore.ValidToken(name) {
			return fmt.Errorf("WithKeyHeader: %q is not a header name", name)
		}
		c.keyHeader, c.keyHeaderSet = http.CanonicalHeaderKey(name), true
		return nil
	}
}

// WithMethods sets the guarded methods (default POST and PATCH); requests
// of other methods pass through untouched.
func WithMethods(methods ...string) Option {
	return func(c *config) error {
		if len(methods) == 0 {
			return errors.New("WithMethods: no methods")
		}
		for _, m := range methods {
			if !httpcore.ValidToken(m) {
				return fmt.Errorf("WithMethods: method %q is not a token", m)
			}
		}
		c.methods = slices.Clone(methods)
		return nil
	}
}

// WithOptionalKey lets requests without a key through to the handler,
// unguarded, instead of answering 400.
func WithOptionalKey() Option {
	return func(c *config) error {
		c.optionalKey = true
		return nil
	}
}

// WithReplayHeaders adds response headers that are stored and replayed,
// besides Content-Type, Content-Encoding and Location. Set-Cookie and
// other per-caller headers are refused: a replay must not hand out
// credentials.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) error {
		for _, n := range names {
			switch {
			case !httpcore.ValidToken(n):
				return fmt.Errorf("WithReplayHeaders: %q is not a header name", n)
			case strings.EqualFold(n, "Set-Cookie"), strings.EqualFold(n, ReplayedHeader):
				return fmt.Errorf("WithReplayHeaders: header %s cannot be replayed", n)
			}
			if n = http.CanonicalHeaderKey(n); !slices.Contains(c.replayHeaders, n) {
				c.replayHeaders = append(c.replayHeaders, n)
			}
		}
		return nil
	}
}

// WithStorePolicy sets which statuses are stored and replayed; responses
// with other statuses are sent once and release the key. The default is
// DefaultStorePolicy.
func WithStorePolicy(store func(status int) bool) Option {
	return func(c *config) error {
		if store == nil {
			return errors.New("WithStorePolicy: nil store policy")
		}
		c.storePolicy, c.storeSet = store, true
		return nil
	}
}

// DefaultStorePolicy stores 2xx and 4xx responses except 408, 409, 425
// and 429, which a retry may turn into another outcome.
func DefaultStorePolicy(status int) bool { return httpcore.DefaultStorePolicy(status) }

// WithMaxStoredResponse sets the largest response body stored (default
// DefaultMaxStoredResponse); n must be positive. A larger response is
// sent as it is and not stored, with a warning logged; its key keeps a
// terminal record, so every repeat gets 500 ProblemResponseNotStored,
// replayed, and the handler never runs twice. The same holds for a
// response over the engine's idemkit.WithMaxResultSize (unless the engine
// is given idemkit.WithOversized(idemkit.ReleaseKey)).
func WithMaxStoredResponse(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxStoredResponse(%d): must be positive", n)
		}
		c.maxStored = n
		return nil
	}
}

// WithVolatile names JSON members left out of the body fingerprint (see
// keying.WithVolatile), such as a client timestamp.
func WithVolatile(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error {
		c.volatile = append(c.volatile, paths...)
		return nil
	}
}

// WithEngineOptions sets engine options for this route (idemkit.WithWait,
// WithFailureMode, WithRetention, ...), validated once by New with
// Engine.With.
func WithEngineOptions(opts ...idemkit.Option) Option {
	opts = slices.Clone(opts)
	return func(c *config) error {
		c.engineOpts = append(c.engineOpts, opts...)
		return nil
	}
}

// WithLogger sets the logger of unexpected outcomes (default
// slog.Default()). Nothing it logs holds a key or a principal.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger: nil logger: leave WithLogger out for slog.Default()")
		}
		c.logger = l
		return nil
	}
}
