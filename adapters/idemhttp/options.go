package idemhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// Header names and limits used when no option overrides them.
const (
	// DefaultKeyHeader is the request header that carries the client's
	// idempotency key (draft-ietf-httpapi-idempotency-key-header).
	DefaultKeyHeader = "Idempotency-Key"
	// DefaultTokenHeader is the request header that carries a one-time
	// token in Token mode.
	DefaultTokenHeader = "Idempotency-Token"
	// ReplayedHeader is set to "true" on every replayed response, and
	// never on a fresh one.
	ReplayedHeader = "Idempotent-Replayed"
	// DefaultMaxBody is the largest request body, in bytes, read for a
	// fingerprint; larger bodies get 413.
	DefaultMaxBody = 1 << 20
	// DefaultMaxStoredResponse is the largest response body, in bytes,
	// that is stored for replay. The engine's own cap
	// (idemkit.WithMaxResultSize, default 1 MiB) applies to the encoded
	// response (status, replayed headers and body) as well.
	DefaultMaxStoredResponse = 1 << 20
	// MaxKeyLen is the longest idempotency key or token accepted, in
	// characters.
	MaxKeyLen = 255
)

// ErrNoPrincipal is returned by principal functions such as
// TrustedHeaderPrincipal when a request carries no identity. The middleware
// answers any principal error with 401.
var ErrNoPrincipal = errors.New("idemhttp: no principal")

// Option configures the middleware constructors (Idempotency, Window,
// Token, TokenIssuer). Each constructor reads the options that apply to
// its mode and ignores the others, so one option list can be shared by
// several routes.
type Option func(*config)

type config struct {
	principal     func(*http.Request) (string, error)
	keyHeader     string
	tokenHeader   string
	methods       []string
	store         func(status int) bool
	replayHeaders []string
	maxBody       int64
	maxStored     int
	query         []string
	querySet      bool
	fp            *keying.Fingerprinter
	callOpts      []idemkit.Option
	logger        *slog.Logger
	optionalKey   bool
	err           error
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		keyHeader:     DefaultKeyHeader,
		tokenHeader:   DefaultTokenHeader,
		methods:       []string{http.MethodPost, http.MethodPatch},
		store:         DefaultStorePolicy,
		replayHeaders: []string{"Content-Type", "Content-Encoding", "Location"},
		maxBody:       DefaultMaxBody,
		maxStored:     DefaultMaxStoredResponse,
		fp:            keying.NewFingerprinter(),
	}
	for _, o := range opts {
		o(c)
	}
	if c.err == nil && c.principal == nil {
		c.invalid("WithPrincipal is required: keys and tokens are scoped by principal")
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("idemhttp: %w: "+format, append([]any{idemkit.ErrInvalid}, args...)...)
	}
}

func (c *config) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

func (c *config) guarded(method string) bool {
	return slices.Contains(c.methods, method)
}

// WithPrincipal sets how the caller of a request is identified. It is
// required: every constructor returns an error wrapping idemkit.ErrInvalid
// without it. Keys, fingerprints and tokens are scoped by the principal,
// so a replay is only ever served to the principal whose request was
// stored. When fn returns an error the request is answered with 401 and
// the handler does not run. Returning "" is allowed and puts every such
// request into one shared anonymous scope. fn must be safe for concurrent
// use.
func WithPrincipal(fn func(*http.Request) (string, error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("nil principal function")
			return
		}
		c.principal = fn
	}
}

// TrustedHeaderPrincipal returns a principal function that reads the
// caller's identity from the request header name, and returns an error
// wrapping ErrNoPrincipal when the header is absent or empty.
//
// Use it only behind a trusted gateway or authenticating proxy that sets
// this header for every request and strips any value the client sent:
// otherwise a client can claim any identity, and read another principal's
// stored responses by guessing its keys.
func TrustedHeaderPrincipal(name string) func(*http.Request) (string, error) {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		v := r.Header[name]
		if len(v) != 1 || v[0] == "" {
			return "", fmt.Errorf("%w: header %s absent, empty or repeated", ErrNoPrincipal, name)
		}
		return v[0], nil
	}
}

// WithKeyHeader sets the request header that carries the idempotency key
// (default DefaultKeyHeader). Idempotency mode only.
func WithKeyHeader(name string) Option {
	return func(c *config) {
		if !validHeaderName(name) {
			c.invalid("invalid key header name %q", name)
			return
		}
		c.keyHeader = http.CanonicalHeaderKey(name)
	}
}

// WithTokenHeader sets the request header that carries the one-time token
// (default DefaultTokenHeader). Token mode only.
func WithTokenHeader(name string) Option {
	return func(c *config) {
		if !validHeaderName(name) {
			c.invalid("invalid token header name %q", name)
			return
		}
		c.tokenHeader = http.CanonicalHeaderKey(name)
	}
}

// WithMethods sets the request methods that are guarded (default POST and
// PATCH). Requests with other methods pass straight to the handler.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		if len(methods) == 0 {
			c.invalid("no methods")
			return
		}
		for _, m := range methods {
			if !validHeaderName(m) {
				c.invalid("invalid method %q", m)
				return
			}
		}
		c.methods = append([]string(nil), methods...)
	}
}

// WithOptionalKey lets requests without an idempotency key through to the
// handler, unguarded, instead of answering 400. Idempotency mode only.
func WithOptionalKey() Option {
	return func(c *config) { c.optionalKey = true }
}

// DefaultStorePolicy is the default store policy: it stores 2xx and 4xx
// responses except 408, 409, 425 and 429, which say "try again", and does
// not store 1xx, 3xx or 5xx. A response that is not stored releases its key
// (Idempotency mode), spends its token without a result (Token mode) or
// counts as a failure for idemkit.ReleaseOnError (Window mode).
func DefaultStorePolicy(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return false
	default:
		return status >= 400 && status < 500
	}
}

// StoreAll is a store policy that stores every response, 5xx included,
// as Stripe does: a retry gets the first outcome whatever it was.
func StoreAll(status int) bool { return true }

// WithStorePolicy sets which response statuses are stored and replayed
// (default DefaultStorePolicy). See also StoreAll.
func WithStorePolicy(store func(status int) bool) Option {
	return func(c *config) {
		if store == nil {
			c.invalid("nil store policy")
			return
		}
		c.store = store
	}
}

// WithReplayHeaders adds response headers to the allow-list that is stored
// and replayed. The list always holds Content-Type, Content-Encoding
// (without which the body cannot be decoded) and Location; other headers
// appear on the fresh response only.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			if !validHeaderName(n) {
				c.invalid("invalid replay header name %q", n)
				return
			}
			c.replayHeaders = append(c.replayHeaders, http.CanonicalHeaderKey(n))
		}
	}
}

// WithMaxBody sets the largest request body read for a fingerprint
// (default DefaultMaxBody); a larger body gets 413 and the handler does
// not run. The body is restored for the handler. Idempotency and Window
// modes.
func WithMaxBody(n int64) Option {
	return func(c *config) {
		if n <= 0 {
			c.invalid("max body must be positive, got %d", n)
			return
		}
		c.maxBody = n
	}
}

// WithMaxStoredResponse sets the largest response body stored for replay
// (default DefaultMaxStoredResponse). A larger response is sent to the
// client as it is written, not stored, and its key released, with a
// warning logged.
func WithMaxStoredResponse(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.invalid("max stored response must be positive, got %d", n)
			return
		}
		c.maxStored = n
	}
}

// WithQueryParams selects the query parameters that are part of the
// request fingerprint. By default Idempotency mode fingerprints every
// query parameter and Window mode none.
func WithQueryParams(names ...string) Option {
	return func(c *config) {
		c.query = append([]string(nil), names...)
		c.querySet = true
	}
}

// WithVolatile adds JSON member names that are dropped, at any depth,
// before a JSON body is fingerprinted, to keying.DefaultVolatile
// (traceId, timestamp, nonce, sign, random).
func WithVolatile(fields ...string) Option {
	return func(c *config) { c.fp = keying.NewFingerprinter(keying.WithExtraVolatile(fields...)) }
}

// WithFingerprinter sets the fingerprinter used for request bodies
// (default keying.NewFingerprinter()). It replaces WithVolatile.
func WithFingerprinter(f *keying.Fingerprinter) Option {
	return func(c *config) {
		if f == nil {
			c.invalid("nil fingerprinter")
			return
		}
		c.fp = f
	}
}

// WithEngineOptions passes engine options to every engine call the route
// makes, for example idemkit.WithFailureMode(idemkit.FailOpen),
// idemkit.WithWindow, idemkit.WithRelease or idemkit.WithRetention. The
// constructors reject invalid engine options (idemkit.CheckOptions).
//
// Do not give an engine used by this package an idemkit.ErrorCodec
// (idemkit.WithErrorCodec) that marks every error final: the middleware
// signals "do not store this response" (5xx by default, see
// WithStorePolicy) with an error from the engine's fn, and such a codec
// would store it and replay a 500 for the whole retention. Which responses
// are final is WithStorePolicy's job here.
func WithEngineOptions(opts ...idemkit.Option) Option {
	return func(c *config) { c.callOpts = append(c.callOpts, opts...) }
}

// WithWait makes a request that repeats one still in flight wait for the
// first one's outcome and replay it, instead of getting 409. The wait is
// bounded by the request's context; poll is the first polling interval
// (0 means idemkit.DefaultPollInterval). Idempotency and Token modes.
func WithWait(poll time.Duration) Option {
	return WithEngineOptions(idemkit.WithWait(poll))
}

// WithLogger sets the logger for warnings such as responses too large to
// store (default slog.Default() at the time of logging).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// validHeaderName reports whether s is a non-empty RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
