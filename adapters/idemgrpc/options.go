package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/idemkit/idemkit"
)

// Metadata names and defaults.
const (
	// DefaultMetadataKey is the request metadata entry that carries the
	// idempotency key, unless WithMetadataKey names another.
	DefaultMetadataKey = "idempotency-key"
	// ReplayedHeader is the response header metadata entry, set to "true",
	// that marks a response (or final error) replayed from the store.
	ReplayedHeader = "idempotent-replayed"
	// MaxKeyLen is the longest idempotency key, in bytes, the server
	// interceptors accept.
	MaxKeyLen = 255
	// DefaultBackoff and DefaultMaxBackoff bound the client interceptor's
	// own retry backoff (see WithBackoff).
	DefaultBackoff    = 50 * time.Millisecond
	DefaultMaxBackoff = time.Second
)

// DefaultFinalCodes returns a new slice holding the status codes that are
// final for a request by default: the same request would fail the same way
// again, so the status is stored and replayed. Every other code releases the
// key so a retry runs the handler again.
func DefaultFinalCodes() []codes.Code {
	return []codes.Code{
		codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.FailedPrecondition, codes.OutOfRange,
		codes.Unimplemented,
	}
}

// errNoPrincipal is the configuration error of a server interceptor built
// without WithPrincipal.
var errNoPrincipal = errors.New("idemgrpc: no principal function configured (use WithPrincipal)")

// Option configures the interceptors. Options are shared by the server and
// client interceptors; each documents the side it applies to, and the other
// side ignores it.
type Option func(*config)

type config struct {
	principal   func(context.Context) (string, error)
	methods     map[string]bool
	selector    func(ctx context.Context, fullMethod string) bool
	mdKey       string
	optionalKey bool
	final       map[codes.Code]bool
	callOpts    []idemkit.Option
	types       protoregistry.MessageTypeResolver
	retries     int
	backoff     time.Duration
	maxBackoff  time.Duration
	err         error // first configuration error
	badSelect   bool  // the method selection is invalid: treat every call as selected
}

func newConfig(opts []Option) *config {
	c := &config{
		methods:    map[string]bool{},
		mdKey:      DefaultMetadataKey,
		types:      protoregistry.GlobalTypes,
		backoff:    DefaultBackoff,
		maxBackoff: DefaultMaxBackoff,
	}
	WithFinalCodes(DefaultFinalCodes()...)(c)
	for _, o := range opts {
		o(c)
	}
	if len(c.methods) == 0 && c.selector == nil && !c.badSelect {
		c.invalidSelection("no method selected: name the non-idempotent methods with WithMethods or WithSelector")
	}
	return c
}

func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("idemgrpc: "+format, args...)
	}
}

// selected reports whether calls of fullMethod are protected. When the
// selection itself is invalid, which methods were meant is unknown, so
// every call counts as selected and fails with the configuration error:
// nothing runs unprotected by mistake.
func (c *config) selected(ctx context.Context, fullMethod string) bool {
	return c.badSelect || c.methods[fullMethod] || (c.selector != nil && c.selector(ctx, fullMethod))
}

// invalidSelection records an invalid method selection.
func (c *config) invalidSelection(format string, args ...any) {
	c.invalid(format, args...)
	c.badSelect = true
}

// validFullMethod reports whether m has the form "/service/method" with a
// non-empty service and method, the only form a call's method name takes.
func validFullMethod(m string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	return strings.HasPrefix(m, "/") && ok && svc != "" && method != "" && !strings.Contains(method, "/")
}

// WithPrincipal sets the function that names the caller of a request, for
// example from its auth info or a verified token in ctx (server side). It
// is required: idempotency keys are scoped to a principal, so one client
// can never replay another's response. A server interceptor built without
// it fails every selected call with codes.Internal. An error from fn fails
// the call with codes.Unauthenticated. A service with a single tenant can
// return a constant.
func WithPrincipal(fn func(ctx context.Context) (string, error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("nil principal function")
			return
		}
		c.principal = fn
	}
}

// WithMethods selects methods by full name ("/package.Service/Method")
// for protection (both sides). It adds to earlier WithMethods calls and
// combines with WithSelector: a method is selected when either selects it.
// A selection is required, since only the service author knows which
// methods are not idempotent: an interceptor built with neither WithMethods
// nor WithSelector fails every call with codes.Internal rather than protect
// nothing in silence.
//
// A name not of that form ("Create", "pkg.Service/Method") could never
// match a call and would leave the method it means unprotected, so it is
// refused: every call through the interceptor, selected or not, then fails
// with codes.Internal.
func WithMethods(fullMethods ...string) Option {
	return func(c *config) {
		for _, m := range fullMethods {
			if !validFullMethod(m) {
				c.invalidSelection("method %q is not a full method name (\"/package.Service/Method\")", m)
				continue
			}
			c.methods[m] = true
		}
	}
}

// WithSelector selects methods for protection with fn (both sides); see
// WithMethods. fn must be safe for concurrent use. A nil fn is refused
// like a malformed method name: every call then fails with codes.Internal.
func WithSelector(fn func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) {
		if fn == nil {
			c.invalidSelection("nil selector")
			return
		}
		c.selector = fn
	}
}

// WithMetadataKey sets the metadata entry that carries the idempotency key
// (both sides; default DefaultMetadataKey). Names are case-insensitive and
// stored in lower case; binary ("-bin") and reserved ("grpc-") names are
// refused, which makes every selected call fail with codes.Internal.
func WithMetadataKey(name string) Option {
	return func(c *config) {
		name = strings.ToLower(name)
		if !validMetadataName(name) {
			c.invalid("invalid metadata key %q", name)
			return
		}
		c.mdKey = name
	}
}

func validMetadataName(name string) bool {
	if name == "" || strings.HasSuffix(name, "-bin") || strings.HasPrefix(name, "grpc-") {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			return false
		}
	}
	return true
}

// WithOptionalKey lets selected calls without an idempotency key through
// unprotected (server side). By default such a call fails with
// codes.InvalidArgument. A key that is present but malformed is refused
// either way.
func WithOptionalKey() Option {
	return func(c *config) { c.optionalKey = true }
}

// WithFinalCodes replaces the status codes that are final for a request
// (server side, unary; default DefaultFinalCodes). A handler error with a
// final code is stored and replayed as the same status (code, message and
// details); any other error, and any error that carries no gRPC status,
// releases the key so a retry runs the handler again. codes.OK is ignored.
func WithFinalCodes(cs ...codes.Code) Option {
	return func(c *config) {
		c.final = make(map[codes.Code]bool, len(cs))
		for _, code := range cs {
			if code != codes.OK {
				c.final[code] = true
			}
		}
	}
}

// WithCallOptions passes engine options to every engine call (server side):
// idemkit.WithFailureMode, WithWait, WithRetention, WithLease, WithRetryHint
// for unary calls; WithWindow and WithRelease for streams. An
// idemkit.WithErrorCodec given here is overridden: use WithFinalCodes. The
// options are checked when the interceptor is built (idemkit.CheckOptions):
// one the engine would refuse makes every selected call fail with
// codes.Internal.
func WithCallOptions(opts ...idemkit.Option) Option {
	return func(c *config) { c.callOpts = append(c.callOpts, opts...) }
}

// WithTypeResolver sets where stored responses find their message type on
// replay (server side, unary; default protoregistry.GlobalTypes, which holds
// every generated message type linked into the program).
func WithTypeResolver(r protoregistry.MessageTypeResolver) Option {
	return func(c *config) {
		if r == nil {
			c.invalid("nil type resolver")
			return
		}
		c.types = r
	}
}

// WithRetries makes the client interceptor resend a selected call up to n
// more times, with the same idempotency key, when it fails with
// codes.Unavailable or with codes.Aborted carrying an errdetails.RetryInfo
// (client side; default 0, no retries of its own). Other codes are returned
// at once. A negative n is refused: every selected call then fails with
// codes.Internal.
func WithRetries(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.invalid("negative retry count %d", n)
			return
		}
		c.retries = n
	}
}

// WithBackoff sets the client interceptor's backoff between retries on
// codes.Unavailable: base doubles with each retry up to maxDelay, and each
// wait is drawn at random from its upper half (client side; defaults
// DefaultBackoff and DefaultMaxBackoff). A retry after codes.Aborted waits
// the server's RetryInfo delay instead, plus up to a fifth more as jitter;
// a RetryInfo delay longer than maxDelay is not waited and the Aborted
// error is returned, so a server cannot hold the client for long.
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *config) {
		if base <= 0 || maxDelay < base {
			c.invalid("backoff needs 0 < base <= max, got %v and %v", base, maxDelay)
			return
		}
		c.backoff, c.maxBackoff = base, maxDelay
	}
}
