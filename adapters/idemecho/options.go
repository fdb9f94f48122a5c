package idemecho

import (
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/netcore"
	"github.com/idemkit/idemkit/keying"
	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
)

// Option configures the constructors (Idempotency, Window, Token,
// TokenIssuer). Each option names the constructors it applies to; given to
// another, or twice where it would replace the first, it is refused: the
// constructor returns an error wrapping idemkit.ErrInvalid that names it.
// A nil Option is refused too. Nothing is clamped or ignored.
type Option func(*config) error

type config struct {
	core       netcore.Config
	principal  PrincipalFunc
	skipper    middleware.Skipper
	httpErrors bool
}

// PrincipalFunc identifies the caller of a request: a user, tenant or
// client id. An error or an empty principal answers 401. The principal
// scopes every key and token and is never written to responses, logs or
// store key names.
type PrincipalFunc func(c *echo.Context) (string, error)

// ErrNoPrincipal is what ContextPrincipal and TrustedHeaderPrincipal
// return for a request that carries no identity.
var ErrNoPrincipal = errors.New("idemecho: no principal")

// WithPrincipal sets the function that identifies the caller. Required by
// every constructor.
func WithPrincipal(fn PrincipalFunc) Option {
	return func(c *config) error { return netcore.SetPrincipal(&c.principal, fn) }
}

// ContextPrincipal reads the principal from the Echo context value name
// (c.Get), as set by the application's authentication middleware, which
// must run before this one. A value that is absent, not a string or empty
// is no principal: 401.
func ContextPrincipal(name string) PrincipalFunc {
	return func(c *echo.Context) (string, error) {
		v := c.Get(name)
		if s, ok := v.(string); ok && s != "" {
			return s, nil
		}
		return "", ErrNoPrincipal
	}
}

// TrustedHeaderPrincipal reads the principal from request header name, as
// set by a gateway that authenticated the caller. Only safe when the
// gateway strips the header from what clients send. A request with the
// header absent, empty or repeated has no principal: 401.
func TrustedHeaderPrincipal(name string) PrincipalFunc {
	return func(c *echo.Context) (string, error) {
		if v, ok := netcore.TrustedHeader(c.Request().Header, name); ok {
			return v, nil
		}
		return "", ErrNoPrincipal
	}
}

// WithKeyHeader sets the request header carrying the idempotency key
// (default DefaultKeyHeader). Idempotency only.
func WithKeyHeader(name string) Option {
	return func(c *config) error { return c.core.SetKeyHeader(name) }
}

// WithTokenHeader sets the request header carrying the one-time token
// (default DefaultTokenHeader). Token only.
func WithTokenHeader(name string) Option {
	return func(c *config) error { return c.core.SetTokenHeader(name) }
}

// WithMethods sets the guarded methods (default POST and PATCH); requests
// of other methods pass through untouched. Idempotency, Window and Token.
func WithMethods(methods ...string) Option {
	methods = slices.Clone(methods)
	return func(c *config) error { return c.core.SetMethods(methods) }
}

// WithOptionalKey lets requests without a key through to the handler,
// unguarded, instead of answering 400. Idempotency only.
func WithOptionalKey() Option {
	return func(c *config) error { return c.core.SetOptionalKey() }
}

// WithReplayHeaders adds response headers that are stored and replayed,
// besides Content-Type, Content-Encoding and Location. Set-Cookie and the
// replay header are refused: a replay must not hand out credentials.
// Idempotency and Token.
func WithReplayHeaders(names ...string) Option {
	names = slices.Clone(names)
	return func(c *config) error { return c.core.SetReplayHeaders(names) }
}

// WithStorePolicy sets which statuses are stored and replayed (Window:
// which count as a success that keeps the window's claim); a response
// with another status is sent once and releases the key. The default is
// DefaultStorePolicy. Idempotency, Window and Token.
func WithStorePolicy(store func(status int) bool) Option {
	return func(c *config) error { return c.core.SetStorePolicy(store) }
}

// WithMaxStoredResponse sets the largest response body stored (default
// DefaultMaxStoredResponse); n must be positive. A larger response is sent
// as it is and not stored, with a warning logged; what its key keeps is
// set by WithUnstored: by default a terminal record, so every repeat gets
// 500 response-not-stored, marked replayed, and the handler never runs
// twice. Idempotency and Token.
func WithMaxStoredResponse(n int) Option {
	return func(c *config) error { return c.core.SetMaxStored(n) }
}

// WithMaxBody sets the largest request body read for the fingerprint
// (default DefaultMaxBody); a larger one gets 413. Idempotency and Window.
func WithMaxBody(n int64) Option {
	return func(c *config) error { return c.core.SetMaxBody(n) }
}

// WithVolatile names JSON members left out of the body fingerprint (see
// keying.WithVolatile), such as a client timestamp. Window leaves out
// keying.WindowVolatile as well. Idempotency and Window.
func WithVolatile(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error { return c.core.AddVolatile(paths) }
}

// WithEngineOptions sets engine options for this route (idemkit.WithWait,
// WithWindow, WithFailureMode, WithRetention, ...), validated once by the
// constructor with Engine.With. Every constructor.
func WithEngineOptions(opts ...idemkit.Option) Option {
	opts = slices.Clone(opts)
	return func(c *config) error { return c.core.AddEngineOptions(opts) }
}

// WithLogger sets the logger of unexpected outcomes (default
// slog.Default()). Nothing it logs holds a key, token or principal. Every
// constructor.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { return c.core.SetLogger(l) }
}

// WithSkipper sets Echo's middleware Skipper: a request for which skip
// returns true goes to the next handler untouched, as with Echo's own
// middleware. Idempotency, Window and Token.
func WithSkipper(skip middleware.Skipper) Option {
	return func(c *config) error {
		if err := c.core.Only("WithSkipper", netcore.ModeKey, netcore.ModeWindow, netcore.ModeToken); err != nil {
			return err
		}
		if skip == nil {
			return errors.New("WithSkipper: nil skipper: leave WithSkipper out to guard every request")
		}
		c.skipper = skip
		return nil
	}
}

// WithHTTPErrors makes the middleware return its errors as
// *echo.HTTPError, for the application's HTTPErrorHandler to render,
// instead of writing problem+json itself. The HTTPError's code is the
// problem's status and its message the problem's detail; it wraps a
// *ProblemError holding the whole problem (errors.As), and the response
// already carries the problem's headers (Retry-After, Cache-Control:
// no-store, and the replay header on a terminal record's answer). Replays
// of stored responses are written as always. Every constructor.
func WithHTTPErrors() Option {
	return func(c *config) error {
		if c.httpErrors {
			return errors.New("WithHTTPErrors given twice")
		}
		c.httpErrors = true
		return nil
	}
}

// Unstored says what a key or token keeps when the handler's response
// cannot be stored for replay. See WithUnstored.
type Unstored = netcore.Unstored

const (
	// KeepTerminal (the default) stores a terminal record: a retry gets
	// 500 ProblemResponseNotStored, marked replayed, and the handler does
	// not run again.
	KeepTerminal = netcore.KeepTerminal
	// ReleaseKey releases the key, so a retry runs the handler again (in
	// Token mode the token is spent without a result: a reuse gets 409
	// ProblemTokenUsed).
	ReleaseKey = netcore.ReleaseKey
)

// WithUnstored sets what a key or token keeps when the response is over
// WithMaxStoredResponse (tooLarge) or streamed, that is, the handler
// flushed or hijacked it (streamed). Both default to KeepTerminal.
// Idempotency and Token.
func WithUnstored(tooLarge, streamed Unstored) Option {
	return func(c *config) error { return c.core.SetUnstored(tooLarge, streamed) }
}

// WithQueryParams selects the query parameters that are part of the
// request fingerprint. By default Idempotency fingerprints every query
// parameter and Window none; WithQueryParams() with no names selects
// none. Idempotency and Window.
func WithQueryParams(names ...string) Option {
	names = slices.Clone(names)
	return func(c *config) error { return c.core.SetQueryParams(names) }
}

// WithFingerprinter sets the fingerprinter of request bodies, instead of
// the mode's default (in Window, the custom fingerprinter drops only the
// paths it was built with). It cannot be combined with WithVolatile: give
// the paths to keying.NewFingerprinter instead. Idempotency and Window.
func WithFingerprinter(f *keying.Fingerprinter) Option {
	return func(c *config) error { return c.core.SetFingerprinter(f) }
}

// WithReplayHeader sets the response header that marks a replay (default
// ReplayedHeader), on stored responses and on the problems of terminal
// records. Idempotency and Token.
func WithReplayHeader(name string) Option {
	return func(c *config) error { return c.core.SetReplayHeader(name) }
}

// WithProblemBase sets the prefix of the problem type URIs (default
// DefaultProblemBase): each type is base followed by its name, such as
// "in-progress". base must be an absolute URI. Every constructor.
func WithProblemBase(base string) Option {
	return func(c *config) error { return c.core.SetProblemBase(base) }
}

// WithWait makes a request that repeats one still in flight wait for the
// first one's outcome and replay it, instead of getting 409. The wait is
// bounded by the request's context; poll is the first polling interval
// (0 means idemkit.DefaultPollInterval; otherwise 1ms to 1m). It is
// idemkit.WithWait given for this route. Idempotency and Token.
func WithWait(poll time.Duration) Option {
	return func(c *config) error { return c.core.SetWait(poll) }
}
