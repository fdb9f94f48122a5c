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
	"github.com/idemkit/idemkit/internal/backoff"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/keying"
)

// Metadata names and defaults.
const (
	// DefaultMetadataKey is the request metadata entry that carries the
	// idempotency key, unless WithMetadataKey names another.
	DefaultMetadataKey = "idempotency-key" // keying.KeyHeader in lower case
	// ReplayedHeader is the response header metadata entry, set to "true",
	// that marks a response (or final error) replayed from the store.
	ReplayedHeader = "idempotent-replayed" // keying.ReplayedHeader in lower case
	// MaxKeyLen is the longest idempotency key, in bytes, that the server
	// accepts and WithCallKey sends.
	MaxKeyLen = keying.MaxKeyLen
	// DefaultMinBackoff and DefaultMaxBackoff bound the client's own
	// retry backoff (see WithBackoff), the same as idemhttp.Transport's.
	DefaultMinBackoff = backoff.DefaultMin
	DefaultMaxBackoff = backoff.DefaultMax
	// FenceMetadataKey is a suggested name for the request metadata entry
	// that carries a claim's fencing token (WithFenceMetadata,
	// FenceFromIncomingContext): the token in decimal.
	FenceMetadataKey = "idempotency-fence"
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

// Option configures a Server (NewServer) or a Client (NewClient). Each
// option documents the side it applies to; given to the other side's
// constructor, it is refused. The constructors refuse an option given an
// invalid argument, naming it, and a nil option by its position counted
// from 1; they report every error, not only the first, in an error
// wrapping idemkit.ErrInvalid.
type Option func(*config) error

// side says which constructor is applying the options.
type side int

const (
	serverSide side = iota
	clientSide
)

func (s side) String() string {
	if s == serverSide {
		return "NewServer"
	}
	return "NewClient"
}

type config struct {
	side        side
	principal   func(context.Context) (string, error)
	methods     map[string]bool
	selector    func(ctx context.Context, fullMethod string) bool
	mdKey       string
	fenceKey    string // WithFenceMetadata's entry in lower case, "" for none
	fenceArg    string // WithFenceMetadata's argument
	optionalKey bool
	final       map[codes.Code]bool
	engineOpts  []idemkit.Option
	types       protoregistry.MessageTypeResolver
	retries     int
	backoff     time.Duration
	maxBackoff  time.Duration
}

// newConfig applies opts for one side through options.Collect. It returns
// the errors of every invalid or misplaced option, not yet wrapping
// idemkit.ErrInvalid (see configError), with the config as far as it
// could be built.
func newConfig(s side, opts []Option) (*config, []error) {
	c := &config{
		side:       s,
		methods:    map[string]bool{},
		mdKey:      DefaultMetadataKey,
		types:      protoregistry.GlobalTypes,
		backoff:    DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
	}
	c.final = finalSet(DefaultFinalCodes())
	errs := options.Collect(c, opts)
	if len(c.methods) == 0 && c.selector == nil {
		errs = append(errs, errors.New("no method selected: name the non-idempotent methods with WithMethods or WithSelector"))
	}
	if c.fenceKey != "" && c.fenceKey == c.mdKey {
		errs = append(errs, fmt.Errorf("WithFenceMetadata(%q): the entry %s carries the idempotency key", c.fenceArg, c.mdKey))
	}
	return c, errs
}

// configError returns nil, or errs joined in an error wrapping
// idemkit.ErrInvalid.
func configError(errs ...error) error {
	if err := options.Invalid(errs...); err != nil {
		return fmt.Errorf("idemgrpc: %w", err)
	}
	return nil
}

// only refuses an option given to the other side's constructor.
func (c *config) only(s side, name string) error {
	if c.side != s {
		return fmt.Errorf("%s applies to %s only", name, s)
	}
	return nil
}

// selected reports whether calls of fullMethod are protected.
func (c *config) selected(ctx context.Context, fullMethod string) bool {
	return c.methods[fullMethod] || (c.selector != nil && c.selector(ctx, fullMethod))
}

// validFullMethod reports whether m has the form "/service/method" with a
// non-empty service and method, the only form a call's method name takes.
func validFullMethod(m string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	return strings.HasPrefix(m, "/") && ok && svc != "" && method != "" && !strings.Contains(method, "/")
}

// WithPrincipal sets the function that names the caller of a request, for
// example from its auth info or a verified token in ctx (server side,
// required). Keys are scoped to the principal, so one caller can never
// replay another's response; see the package doc, # Keys and principals.
// fn must be safe for concurrent use.
func WithPrincipal(fn func(ctx context.Context) (string, error)) Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithPrincipal"); err != nil {
			return err
		}
		if fn == nil {
			return errors.New("WithPrincipal(nil): nil principal function")
		}
		c.principal = fn
		return nil
	}
}

// WithMethods selects methods by full name ("/package.Service/Method")
// for protection (both sides). It adds to earlier WithMethods calls and
// combines with WithSelector: a method is selected when either selects it.
// A name not of that form is refused, since it could never match a call.
func WithMethods(fullMethods ...string) Option {
	return func(c *config) error {
		var errs []error
		for _, m := range fullMethods {
			if !validFullMethod(m) {
				errs = append(errs, fmt.Errorf("WithMethods(%q): not a full method name (\"/package.Service/Method\")", m))
				continue
			}
			c.methods[m] = true
		}
		return errors.Join(errs...)
	}
}

// WithSelector selects methods for protection with fn (both sides); see
// WithMethods. fn must be safe for concurrent use.
func WithSelector(fn func(ctx context.Context, fullMethod string) bool) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithSelector(nil): nil selector")
		}
		c.selector = fn
		return nil
	}
}

// WithMetadataKey sets the metadata entry that carries the idempotency key
// (both sides; default DefaultMetadataKey). Names are case-insensitive and
// kept in lower case; binary ("-bin") and reserved ("grpc-") names are
// refused.
func WithMetadataKey(name string) Option {
	return func(c *config) error {
		lower := strings.ToLower(name)
		if !validMetadataName(lower) {
			return fmt.Errorf("WithMetadataKey(%q): invalid metadata key", name)
		}
		c.mdKey = lower
		return nil
	}
}

// WithFenceMetadata makes the client send the fencing token of the
// idemkit claim whose work makes a call (idemkit.FenceFromContext of the
// call's context), in decimal, in the request metadata entry name (client
// side; default: no token is sent). Every call through the Client's
// interceptors carries it, unary or stream, selected or not, except a
// call with WithoutIdempotency or whose outgoing metadata already holds
// the entry; a call made outside such work carries none.
// FenceMetadataKey is a suggested name. Names are case-insensitive and
// kept in lower case; binary ("-bin") and reserved ("grpc-") names are
// refused, and so is the idempotency key's entry (WithMetadataKey).
//
// The service reads the token with FenceFromIncomingContext and refuses
// a token lower than the highest it has seen for the idempotency key: the
// call then comes from a caller whose claim was taken over after its
// lease ended.
func WithFenceMetadata(name string) Option {
	return func(c *config) error {
		if err := c.only(clientSide, "WithFenceMetadata"); err != nil {
			return err
		}
		lower := strings.ToLower(name)
		if !validMetadataName(lower) {
			return fmt.Errorf("WithFenceMetadata(%q): invalid metadata key", name)
		}
		c.fenceKey, c.fenceArg = lower, name
		return nil
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
	return func(c *config) error {
		if err := c.only(serverSide, "WithOptionalKey"); err != nil {
			return err
		}
		c.optionalKey = true
		return nil
	}
}

// WithFinalCodes replaces the status codes that are final for a request
// (server side, unary; default DefaultFinalCodes): a handler error with a
// final code is stored and replayed as the same status. codes.OK is
// refused: a success is never an error to replay.
func WithFinalCodes(cs ...codes.Code) Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithFinalCodes"); err != nil {
			return err
		}
		for _, code := range cs {
			if code == codes.OK || code > codes.Unauthenticated {
				return fmt.Errorf("WithFinalCodes(%v): not a final error code", code)
			}
		}
		c.final = finalSet(cs)
		return nil
	}
}

func finalSet(cs []codes.Code) map[codes.Code]bool {
	m := make(map[codes.Code]bool, len(cs))
	for _, code := range cs {
		m[code] = true
	}
	return m
}

// WithEngineOptions sets the engine options of every protected call (server
// side): idemkit.WithFailureMode, WithWait, WithRetention, WithLease,
// WithRetryHint, WithMaxResultSize, WithOversized for unary calls;
// WithWindow and WithRelease for streams. NewServer validates them once.
// The error codec is the server's own (see WithFinalCodes): an
// idemkit.WithErrorCodec here is refused by NewServer.
func WithEngineOptions(opts ...idemkit.Option) Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithEngineOptions"); err != nil {
			return err
		}
		c.engineOpts = append(c.engineOpts, opts...)
		return nil
	}
}

// WithTypeResolver sets where stored responses find their message type on
// replay (server side, unary; default protoregistry.GlobalTypes, which holds
// every generated message type linked into the program).
func WithTypeResolver(r protoregistry.MessageTypeResolver) Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithTypeResolver"); err != nil {
			return err
		}
		if r == nil {
			return errors.New("WithTypeResolver(nil): nil type resolver")
		}
		c.types = r
		return nil
	}
}

// WithRetries makes the client resend a selected call up to n more times,
// with the same idempotency key, when it fails with codes.Unavailable, or
// with codes.Aborted carrying an errdetails.RetryInfo (client side; default
// 0). See the package doc, # Client retries.
func WithRetries(n int) Option {
	return func(c *config) error {
		if err := c.only(clientSide, "WithRetries"); err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("WithRetries(%d): negative retry count", n)
		}
		c.retries = n
		return nil
	}
}

// WithBackoff sets the client's backoff between retries on
// codes.Unavailable: base doubles with each retry up to maxDelay, with
// jitter (client side; defaults DefaultMinBackoff and DefaultMaxBackoff).
// maxDelay also bounds the RetryInfo delay the client will wait after
// codes.Aborted.
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *config) error {
		if err := c.only(clientSide, "WithBackoff"); err != nil {
			return err
		}
		if base <= 0 || maxDelay < base {
			return fmt.Errorf("WithBackoff(%v, %v): backoff needs 0 < base <= max", base, maxDelay)
		}
		c.backoff, c.maxBackoff = base, maxDelay
		return nil
	}
}
