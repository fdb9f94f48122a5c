package idemhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/keying"
)

// Header names and limits used when no option overrides them. The names
// and MaxKeyLen are keying's, which every transport shares.
const (
	// DefaultKeyHeader is the request header that carries the client's
	// idempotency key (draft-ietf-httpapi-idempotency-key-header).
	DefaultKeyHeader = httpcore.DefaultKeyHeader
	// DefaultTokenHeader is the request header that carries a one-time
	// token in Token mode.
	DefaultTokenHeader = httpcore.DefaultTokenHeader
	// ReplayedHeader is the default replay header (WithReplayHeader):
	// "true" on every replayed response, never on a fresh one.
	ReplayedHeader = httpcore.ReplayedHeader
	// DefaultMaxBody is the largest request body, in bytes, read for a
	// fingerprint; larger bodies get 413.
	DefaultMaxBody = 1 << 20
	// DefaultMaxStoredResponse is the largest response, in bytes, stored
	// for replay: see WithMaxStoredResponse.
	DefaultMaxStoredResponse = httpcore.DefaultMaxStoredResponse
	// MaxKeyLen is the longest idempotency key or token accepted, in
	// characters.
	MaxKeyLen = keying.MaxKeyLen
)

// ErrNoPrincipal is returned by principal functions such as
// TrustedHeaderPrincipal when a request carries no identity. The middleware
// answers any principal error with 401.
var ErrNoPrincipal = errors.New("idemhttp: no principal")

// Option configures the middleware constructors (Idempotency, Window,
// Token, TokenIssuer). Each option names the constructors it applies to;
// given to another, where it would change nothing, it is refused: the
// constructor returns an error wrapping idemkit.ErrInvalid that names the
// option. A nil Option is refused too.
type Option func(*config) error

type config struct {
	mode          mode // the constructor applying the options
	principal     func(*http.Request) (string, error)
	keyHeader     string
	tokenHeader   string
	tokenField    string
	replayHeader  string
	methods       []string
	store         func(status int) bool
	replayHeaders []string
	maxBody       int64
	maxStored     int
	query         []string
	querySet      bool
	volatile      []string
	include       []string
	keyFrom       *KeySource            // WithKeyFrom's source, or nil for the key header
	keyHeaderSet  bool                  // WithKeyHeader was given
	storeSet      bool                  // WithStorePolicy was given
	callback      bool                  // Callback was given
	fp            *keying.Fingerprinter // set by WithFingerprinter
	maxBodySet    bool                  // WithMaxBody was given
	engineOpts    []idemkit.Option
	logger        *slog.Logger
	optionalKey   bool
	tooLarge      Unstored
	streamed      Unstored
	payloadWindow time.Duration
	problemBase   string
	members       ProblemMembers
	instance      func(*http.Request) string
	resumeName    string   // WithResume
	resumeHeaders []string // WithResume
}

func newConfig(m mode, opts []Option) (*config, error) {
	c := &config{
		mode:          m,
		keyHeader:     DefaultKeyHeader,
		tokenHeader:   DefaultTokenHeader,
		replayHeader:  ReplayedHeader,
		methods:       []string{http.MethodPost, http.MethodPatch},
		store:         DefaultStorePolicy,
		replayHeaders: httpcore.DefaultReplayHeaders(),
		maxBody:       DefaultMaxBody,
		maxStored:     DefaultMaxStoredResponse,
		problemBase:   DefaultProblemBase,
		members:       DefaultProblemMembers,
		instance:      UUIDInstance,
	}
	errs := options.Collect(c, opts)
	if c.principal == nil {
		errs = append(errs, errors.New("WithPrincipal is required: keys and tokens are scoped by principal"))
	}
	if c.fp != nil && len(c.include) > 0 {
		errs = append(errs, errors.New("WithInclude and WithFingerprinter cannot be combined: give the paths to keying.NewFingerprinter with keying.WithInclude instead"))
	}
	if c.keyFrom != nil && c.keyHeaderSet {
		errs = append(errs, errors.New("WithKeyFrom and WithKeyHeader cannot be combined: use KeyFromHeader"))
	}
	errs = append(errs, c.checkCallback()...)
	if c.fp != nil && len(c.volatile) > 0 {
		errs = append(errs, errors.New("WithVolatile and WithFingerprinter cannot be combined: the fingerprinter would ignore the volatile paths; "+
			"give them to keying.NewFingerprinter with keying.WithVolatile instead"))
	}
	if slices.Contains(c.replayHeaders, c.replayHeader) {
		errs = append(errs, fmt.Errorf("WithReplayHeaders: header %s cannot be replayed: it marks replays (WithReplayHeader)", c.replayHeader))
	}
	errs = append(errs, c.checkResume()...)
	if m == modeToken && c.maxBodySet && c.tokenField == "" {
		errs = append(errs, errors.New("WithMaxBody: applies to Token only with WithTokenField, not Token without it: no body is read"))
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemhttp: %w", err)
	}
	return c, nil
}

// only refuses an option given to a constructor it does not apply to: it
// returns nil when the option may go on, and otherwise its error.
func (c *config) only(name string, modes ...mode) error {
	if slices.Contains(modes, c.mode) {
		return nil
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.String()
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return fmt.Errorf("%s: applies to %s only, not %s", name, list, c.mode)
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

// WithPrincipal sets how the caller of a request is identified; it is
// required by every constructor. The principal is the engine scope (idemkit.WithScope) of every
// key and token, so a replay is only served to the principal whose request
// was stored. When fn returns an error or "" the request gets 401 and the
// handler does not run. fn must be safe for concurrent use.
func WithPrincipal(fn func(*http.Request) (string, error)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithPrincipal: nil principal function")
		}
		c.principal = fn
		return nil
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
// (default DefaultKeyHeader). Idempotency only.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if err := c.only("WithKeyHeader", modeKey); err != nil {
			return err
		}
		if !httpcore.ValidToken(name) {
			return fmt.Errorf("WithKeyHeader: invalid header name %q", name)
		}
		c.keyHeader, c.keyHeaderSet = http.CanonicalHeaderKey(name), true
		return nil
	}
}

// WithTokenHeader sets the request header that carries the one-time token
// (default DefaultTokenHeader). Token only.
func WithTokenHeader(name string) Option {
	return func(c *config) error {
		if err := c.only("WithTokenHeader", modeToken); err != nil {
			return err
		}
		if !httpcore.ValidToken(name) {
			return fmt.Errorf("WithTokenHeader: invalid header name %q", name)
		}
		c.tokenHeader = http.CanonicalHeaderKey(name)
		return nil
	}
}

// WithMethods sets the request methods that are guarded (default POST and
// PATCH). Requests with other methods pass straight to the handler.
// Idempotency, Window and Token (TokenIssuer answers every method).
func WithMethods(methods ...string) Option {
	return func(c *config) error {
		if err := c.only("WithMethods", modeKey, modeWindow, modeToken); err != nil {
			return err
		}
		if len(methods) == 0 {
			return errors.New("WithMethods: no methods")
		}
		for _, m := range methods {
			if !httpcore.ValidToken(m) {
				return fmt.Errorf("WithMethods: invalid method %q", m)
			}
		}
		c.methods = append([]string(nil), methods...)
		return nil
	}
}

// WithOptionalKey lets requests without an idempotency key through to the
// handler, unguarded, instead of answering 400. Idempotency only.
func WithOptionalKey() Option {
	return func(c *config) error {
		if err := c.only("WithOptionalKey", modeKey); err != nil {
			return err
		}
		c.optionalKey = true
		return nil
	}
}

// DefaultStorePolicy is the default store policy: it stores 2xx and 4xx
// responses except 408, 409, 425 and 429, which say "try again", and does
// not store 1xx, 3xx or 5xx. A response that is not stored releases its key
// (Idempotency mode), spends its token without a result (Token mode) or
// counts as a failure for idemkit.ReleaseOnError (Window mode).
func DefaultStorePolicy(status int) bool { return httpcore.DefaultStorePolicy(status) }

// StoreAll is a store policy that stores every response, 5xx included,
// as Stripe does: a retry gets the first outcome whatever it was.
func StoreAll(status int) bool { return true }

// WithStorePolicy sets which response statuses are stored and replayed
// (default DefaultStorePolicy); in Window mode, which end the handler
// successfully. See also StoreAll. Idempotency, Window and Token.
func WithStorePolicy(store func(status int) bool) Option {
	return func(c *config) error {
		if err := c.only("WithStorePolicy", modeKey, modeWindow, modeToken); err != nil {
			return err
		}
		if store == nil {
			return errors.New("WithStorePolicy: nil store policy")
		}
		c.store, c.storeSet = store, true
		return nil
	}
}

// WithReplayHeaders adds response headers to the allow-list that is stored
// and replayed. The list always holds Content-Type, Content-Encoding
// (without which the body cannot be decoded) and Location; other headers
// appear on the fresh response only. The replay header (WithReplayHeader)
// is refused: the middleware sets it itself. Idempotency and Token.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) error {
		if err := c.only("WithReplayHeaders", modeKey, modeToken); err != nil {
			return err
		}
		for _, n := range names {
			if !httpcore.ValidToken(n) {
				return fmt.Errorf("WithReplayHeaders: invalid header name %q", n)
			}
			if n = http.CanonicalHeaderKey(n); !slices.Contains(c.replayHeaders, n) {
				c.replayHeaders = append(c.replayHeaders, n)
			}
		}
		return nil
	}
}

// WithMaxBody sets the largest request body read for a fingerprint
// (default DefaultMaxBody); a larger body gets 413 and the handler does
// not run. The body is restored for the handler. Idempotency and Window;
// Token with WithTokenField, whose form body it bounds.
func WithMaxBody(n int64) Option {
	return func(c *config) error {
		if err := c.only("WithMaxBody", modeKey, modeWindow, modeToken); err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("WithMaxBody(%d): must be positive", n)
		}
		c.maxBody, c.maxBodySet = n, true
		return nil
	}
}

// WithMaxStoredResponse sets the largest encoded response (status,
// replayed headers and body) stored for replay (default
// DefaultMaxStoredResponse). A larger response is sent to the client as it
// is written; what its key keeps is set by WithUnstored. Keep it at or
// under the engine's idemkit.WithMaxResultSize: a response under this cap
// but over the engine's is not stored either, with a warning, and its key
// keeps what the engine's idemkit.WithOversized says (by default a
// terminal record: a retry gets 500 ProblemResponseNotStored). n must be
// positive. Idempotency and Token.
func WithMaxStoredResponse(n int) Option {
	return func(c *config) error {
		if err := c.only("WithMaxStoredResponse", modeKey, modeToken); err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("WithMaxStoredResponse(%d): must be positive", n)
		}
		c.maxStored = n
		return nil
	}
}

// Unstored says what a key or token keeps when the handler's response
// cannot be stored for replay. See WithUnstored.
type Unstored uint8

const (
	// KeepTerminal (the default) stores a terminal record: a retry gets
	// 500 ProblemResponseNotStored, marked replayed, and the handler does
	// not run again.
	KeepTerminal Unstored = iota
	// ReleaseKey releases the key, so a retry runs the handler again (in
	// Token mode the token is spent without a result: a reuse gets 409
	// ProblemTokenUsed).
	ReleaseKey
)

// WithUnstored sets what a key or token keeps when the response is over
// WithMaxStoredResponse (tooLarge) or streamed, that is, the handler
// called Flush or Hijack (streamed). Both default to KeepTerminal.
// Idempotency and Token.
func WithUnstored(tooLarge, streamed Unstored) Option {
	return func(c *config) error {
		if err := c.only("WithUnstored", modeKey, modeToken); err != nil {
			return err
		}
		if tooLarge > ReleaseKey || streamed > ReleaseKey {
			return fmt.Errorf("WithUnstored(%d, %d): unknown Unstored value", tooLarge, streamed)
		}
		c.tooLarge, c.streamed = tooLarge, streamed
		return nil
	}
}

// WithQueryParams selects the query parameters that are part of the
// request fingerprint. By default Idempotency mode fingerprints every
// query parameter and Window mode none; WithQueryParams() with no names
// selects none. Idempotency and Window.
func WithQueryParams(names ...string) Option {
	return func(c *config) error {
		if err := c.only("WithQueryParams", modeKey, modeWindow); err != nil {
			return err
		}
		c.query = append([]string(nil), names...)
		c.querySet = true
		return nil
	}
}

// WithVolatile adds paths of JSON members dropped before a request body
// is fingerprinted, written as for keying.WithVolatile ("timestamp" is a
// top-level member; "meta.nonce" and "items[].ts" reach deeper). By default
// Idempotency mode compares the whole body and Window mode drops
// keying.WindowVolatile. A malformed path makes the constructor fail, and
// so does WithFingerprinter, which would ignore the paths. Idempotency and
// Window.
func WithVolatile(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error {
		if err := c.only("WithVolatile", modeKey, modeWindow); err != nil {
			return err
		}
		c.volatile = append(c.volatile, paths...)
		return nil
	}
}

// WithInclude makes the request fingerprint cover only the named members
// of a JSON body, written as for keying.WithInclude, instead of the whole
// body: a retry whose other members changed (a send time, an attempt
// count) is still the same request, one whose named members changed gets
// 422 ProblemKeyMismatch. Volatile paths (WithVolatile) are dropped first.
// A malformed path makes the constructor fail, and so does
// WithFingerprinter. Idempotency and Window.
func WithInclude(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error {
		if err := c.only("WithInclude", modeKey, modeWindow); err != nil {
			return err
		}
		if len(paths) == 0 {
			return errors.New("WithInclude: no paths")
		}
		c.include = append(c.include, paths...)
		return nil
	}
}

// WithFingerprinter sets the fingerprinter used for request bodies,
// instead of the mode's default (in Window mode, the custom fingerprinter
// drops only the paths it was built with). It cannot be combined with
// WithVolatile: give the paths to keying.NewFingerprinter instead.
// Idempotency and Window.
func WithFingerprinter(f *keying.Fingerprinter) Option {
	return func(c *config) error {
		if err := c.only("WithFingerprinter", modeKey, modeWindow); err != nil {
			return err
		}
		if f == nil {
			return errors.New("WithFingerprinter: nil fingerprinter")
		}
		c.fp = f
		return nil
	}
}

// WithEngineOptions sets engine options for every engine call the route
// makes, for example idemkit.WithFailureMode(idemkit.FailOpen),
// idemkit.WithWindow or idemkit.WithRetention. They are validated once, by
// the constructor (an error wraps idemkit.ErrInvalid). Every constructor.
//
// Do not give the engine an idemkit.ErrorCodec that marks every error
// final: the middleware says "do not store this response" with an error,
// and such a codec would store it. WithStorePolicy decides what is final.
func WithEngineOptions(opts ...idemkit.Option) Option {
	opts = slices.Clone(opts)
	return func(c *config) error {
		c.engineOpts = append(c.engineOpts, opts...)
		return nil
	}
}

// WithWait makes a request that repeats one still in flight wait for the
// first one's outcome and replay it, instead of getting 409. The wait is
// bounded by the request's context; poll is the first polling interval
// (0 means idemkit.DefaultPollInterval). Idempotency and Token: Window
// has nothing to wait for.
func WithWait(poll time.Duration) Option {
	return func(c *config) error {
		if err := c.only("WithWait", modeKey, modeToken); err != nil {
			return err
		}
		if poll < 0 || (poll > 0 && poll < time.Millisecond) || poll > time.Minute {
			return fmt.Errorf("WithWait(%v): poll interval must be 0 (idemkit.DefaultPollInterval) or between 1ms and 1m", poll)
		}
		c.engineOpts = append(c.engineOpts, idemkit.WithWait(poll))
		return nil
	}
}

// WithLogger sets the logger for warnings such as responses too large to
// store. Leave it out for slog.Default() at the time of logging; a nil l is
// refused. Log lines never hold keys, tokens, principals or store error
// texts. Every constructor.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger: nil logger: leave WithLogger out for slog.Default()")
		}
		c.logger = l
		return nil
	}
}

// WithReplayHeader sets the response header that marks a replay (default
// ReplayedHeader). Idempotency and Token.
func WithReplayHeader(name string) Option {
	return func(c *config) error {
		if err := c.only("WithReplayHeader", modeKey, modeToken); err != nil {
			return err
		}
		if !httpcore.ValidToken(name) {
			return fmt.Errorf("WithReplayHeader: invalid header name %q", name)
		}
		c.replayHeader = http.CanonicalHeaderKey(name)
		return nil
	}
}

// WithTokenField makes Token mode accept the token from the form field
// name as well as from the token header (which wins when both are sent),
// for server-rendered HTML forms, which cannot set headers. The field is
// read from application/x-www-form-urlencoded and multipart/form-data
// bodies of at most WithMaxBody bytes (larger ones get 413); the body
// reaches the handler intact. Token only.
func WithTokenField(name string) Option {
	return func(c *config) error {
		if err := c.only("WithTokenField", modeToken); err != nil {
			return err
		}
		if name == "" {
			return errors.New("WithTokenField: empty field name")
		}
		c.tokenField = name
		return nil
	}
}

// WithPayloadWindow makes Idempotency mode answer 409 ProblemPayloadReused
// to a request whose payload (the fingerprint) was sent under another key
// by the same principal less than d ago: a guard against clients that mint
// a new key per click. A retry with the first key still gets its outcome.
// Each guarded request costs one more store operation. Idempotency only.
func WithPayloadWindow(d time.Duration) Option {
	return func(c *config) error {
		if err := c.only("WithPayloadWindow", modeKey); err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("WithPayloadWindow(%v): must be positive", d)
		}
		c.payloadWindow = d
		return nil
	}
}
