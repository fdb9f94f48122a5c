package idemconnect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/backoff"
	"github.com/idemkit/idemkit/internal/options"
)

// Header names and defaults.
const (
	// DefaultKeyHeader is the request header that carries the idempotency
	// key, unless WithKeyHeader names another. Over gRPC and gRPC-Web it
	// travels as the metadata entry "idempotency-key".
	DefaultKeyHeader = httpcore.DefaultKeyHeader
	// ReplayedHeader is the response header, set to "true", that marks a
	// response (or final error) replayed from the store.
	ReplayedHeader = httpcore.ReplayedHeader
	// DefaultMinBackoff and DefaultMaxBackoff bound the client's retry
	// backoff (see WithBackoff), the same as idemgrpc's.
	DefaultMinBackoff = backoff.DefaultMin
	DefaultMaxBackoff = backoff.DefaultMax
	// FenceHeader is a suggested name for the request header that carries
	// a claim's fencing token (WithFenceHeader, FenceFromHeader): the
	// token in decimal. It is idemgrpc.FenceMetadataKey, so a service
	// reads one header whichever adapter called it.
	FenceHeader = "Idempotency-Fence"
)

// DefaultFinalCodes returns a new slice holding the codes that are final
// for a request by default: the same request would fail the same way
// again, so the error is stored and replayed. Every other code releases
// the key so a retry runs the handler again. They are idemgrpc's.
func DefaultFinalCodes() []connect.Code {
	return []connect.Code{
		connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeAlreadyExists,
		connect.CodePermissionDenied, connect.CodeFailedPrecondition, connect.CodeOutOfRange,
		connect.CodeUnimplemented,
	}
}

// Option configures a Server (NewServer) or a Client (NewClient). Each
// option documents the side it applies to; given to the other side's
// constructor, it is refused. The constructors refuse an option given an
// invalid argument, naming it, a nil option by its position counted from
// 1, and an option given twice where the second would replace the first;
// they report every error, not only the first, in an error wrapping
// idemkit.ErrInvalid.
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

// procedure is a selected procedure: its response type, to check and
// rebuild stored responses.
type procedure struct {
	response protoreflect.FullName
	// decode unmarshals a stored response message into a new
	// *connect.Response of the procedure's response type.
	decode func(b []byte) (connect.AnyResponse, error)
}

type config struct {
	side        side
	principal   func(ctx context.Context, header http.Header) (string, error)
	procs       map[string]procedure
	keyHeader   string // canonical form
	optionalKey bool
	final       map[connect.Code]bool
	finalSet    bool
	engineOpts  []idemkit.Option
	retries     int
	retriesSet  bool
	backoff     time.Duration
	maxBackoff  time.Duration
	backoffSet  bool
	keySet      bool
	fenceHeader string // WithFenceHeader's, canonical; "" for none
}

// newConfig applies opts for one side. It returns the errors of every
// invalid or misplaced option, not yet wrapping idemkit.ErrInvalid.
func newConfig(s side, opts []Option) (*config, []error) {
	c := &config{
		side:       s,
		procs:      map[string]procedure{},
		keyHeader:  DefaultKeyHeader,
		final:      finalSet(DefaultFinalCodes()),
		backoff:    DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
	}
	errs := options.Collect(c, opts)
	if len(c.procs) == 0 {
		errs = append(errs, errors.New("no procedure selected: name the non-idempotent procedures with WithProcedure"))
	}
	if c.fenceHeader != "" && c.fenceHeader == c.keyHeader {
		errs = append(errs, fmt.Errorf("WithFenceHeader(%q): the header %s carries the idempotency key", c.fenceHeader, c.keyHeader))
	}
	return c, errs
}

// configError returns nil, or errs joined in an error wrapping
// idemkit.ErrInvalid.
func configError(errs ...error) error {
	if err := options.Invalid(errs...); err != nil {
		return fmt.Errorf("idemconnect: %w", err)
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

// validProcedure reports whether p has the form "/package.Service/Method".
func validProcedure(p string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return strings.HasPrefix(p, "/") && ok && svc != "" && method != "" && !strings.Contains(method, "/")
}

// WithProcedure selects the procedure (its full name, such as the
// generated constant "/shop.v1.OrderService/Create") for protection, with
// Res its response message type (both sides):
//
//	idemconnect.WithProcedure[shopv1.CreateResponse](shopv1connect.OrderServiceCreateProcedure)
//
// Only the service author knows which procedures are not idempotent; the
// others pass through untouched. The server needs Res to give a stored
// response back as the *connect.Response[Res] the handler returned; when
// the procedure's generated schema (connect.WithSchema) names another
// response type, its calls fail with connect.CodeInternal before the
// handler runs. Streams are not replayed, so for a streaming procedure
// Res only has to be a message type. A procedure selected twice, or a
// name not of that form, is refused.
func WithProcedure[Res any, PRes interface {
	*Res
	proto.Message
}](name string) Option {
	return func(c *config) error {
		if !validProcedure(name) {
			return fmt.Errorf("WithProcedure(%q): not a procedure name (\"/package.Service/Method\")", name)
		}
		if _, dup := c.procs[name]; dup {
			return fmt.Errorf("WithProcedure(%q): given twice", name)
		}
		c.procs[name] = procedure{
			response: PRes(new(Res)).ProtoReflect().Descriptor().FullName(),
			decode: func(b []byte) (connect.AnyResponse, error) {
				m := new(Res)
				if err := proto.Unmarshal(b, PRes(m)); err != nil {
					return nil, err
				}
				return connect.NewResponse(m), nil
			},
		}
		return nil
	}
}

// WithPrincipal sets the function that names the caller of a request
// from its context (set by an authentication interceptor or middleware)
// or its request header (server side, required). Keys are scoped to the
// principal, so one caller can never replay another's response. fn must
// be safe for concurrent use.
func WithPrincipal(fn func(ctx context.Context, header http.Header) (string, error)) Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithPrincipal"); err != nil {
			return err
		}
		if fn == nil {
			return errors.New("WithPrincipal(nil): nil principal function")
		}
		if c.principal != nil {
			return errors.New("WithPrincipal: given twice")
		}
		c.principal = fn
		return nil
	}
}

// WithKeyHeader sets the request header that carries the idempotency key
// (both sides; default DefaultKeyHeader). Names are case-insensitive;
// names reserved by the protocols ("Connect-", "Grpc-" prefixes, "-Bin"
// suffix) and names that are not HTTP tokens are refused.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if !validHeaderName(name) {
			return fmt.Errorf("WithKeyHeader(%q): not a header name for a key", name)
		}
		if c.keySet {
			return errors.New("WithKeyHeader: given twice")
		}
		c.keyHeader, c.keySet = http.CanonicalHeaderKey(name), true
		return nil
	}
}

// validHeaderName reports whether name is an HTTP token that no protocol
// reserves ("Connect-", "Grpc-" prefixes, "-Bin" suffix).
func validHeaderName(name string) bool {
	lower := strings.ToLower(name)
	return httpcore.ValidToken(name) && !strings.HasPrefix(lower, "connect-") && !strings.HasPrefix(lower, "grpc-") && !strings.HasSuffix(lower, "-bin")
}

// WithFenceHeader makes the client send the fencing token of the idemkit
// claim whose work makes a call (idemkit.FenceFromContext of the call's
// context), in decimal, in the request header name (client side;
// default: no token is sent). Every call through the Client carries it,
// unary or stream, selected or not, unless its request header already
// holds one; a call made outside such work carries none. FenceHeader is
// a suggested name. Names the protocols reserve, and the idempotency
// key's header, are refused.
//
// The service reads the token with FenceFromHeader and refuses a token
// lower than the highest it has seen for the idempotency key: the call
// then comes from a caller whose claim was taken over after its lease
// ended.
func WithFenceHeader(name string) Option {
	return func(c *config) error {
		if err := c.only(clientSide, "WithFenceHeader"); err != nil {
			return err
		}
		if !validHeaderName(name) {
			return fmt.Errorf("WithFenceHeader(%q): not a header name for a fence", name)
		}
		if c.fenceHeader != "" {
			return errors.New("WithFenceHeader: given twice")
		}
		c.fenceHeader = http.CanonicalHeaderKey(name)
		return nil
	}
}

// WithOptionalKey lets selected calls without an idempotency key through
// unprotected (server side). By default such a call fails with
// connect.CodeInvalidArgument. A key that is present but malformed is
// refused either way.
func WithOptionalKey() Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithOptionalKey"); err != nil {
			return err
		}
		c.optionalKey = true
		return nil
	}
}

// WithFinalCodes replaces the codes that are final for a request (server
// side, unary; default DefaultFinalCodes): a handler error with a final
// code is stored and replayed as the same code, message, details and
// metadata. A code that is not an error code is refused.
func WithFinalCodes(cs ...connect.Code) Option {
	return func(c *config) error {
		if err := c.only(serverSide, "WithFinalCodes"); err != nil {
			return err
		}
		if c.finalSet {
			return errors.New("WithFinalCodes: given twice")
		}
		for _, code := range cs {
			if code < connect.CodeCanceled || code > connect.CodeUnauthenticated {
				return fmt.Errorf("WithFinalCodes(%v): not an error code", code)
			}
		}
		c.final, c.finalSet = finalSet(cs), true
		return nil
	}
}

func finalSet(cs []connect.Code) map[connect.Code]bool {
	m := make(map[connect.Code]bool, len(cs))
	for _, code := range cs {
		m[code] = true
	}
	return m
}

// WithEngineOptions sets the engine options of every protected call
// (server side): idemkit.WithFailureMode, WithWait, WithRetention,
// WithLease, WithRetryHint, WithMaxResultSize, WithOversized for unary
// calls; WithWindow and WithRelease for streams. NewServer validates them
// once. The error codec is the server's own (see WithFinalCodes): an
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

// WithRetries makes the client resend a selected unary call up to n more
// times, with the same idempotency key, when it fails with
// connect.CodeUnavailable, or with connect.CodeAborted carrying an
// errdetails.RetryInfo (client side; default 0).
func WithRetries(n int) Option {
	return func(c *config) error {
		if err := c.only(clientSide, "WithRetries"); err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("WithRetries(%d): negative retry count", n)
		}
		if c.retriesSet {
			return errors.New("WithRetries: given twice")
		}
		c.retries, c.retriesSet = n, true
		return nil
	}
}

// WithBackoff sets the client's backoff between retries on
// connect.CodeUnavailable: base doubles with each retry up to maxDelay,
// with jitter (client side; defaults DefaultMinBackoff and
// DefaultMaxBackoff). maxDelay also bounds the RetryInfo delay the client
// waits after connect.CodeAborted: a longer one is not waited.
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *config) error {
		if err := c.only(clientSide, "WithBackoff"); err != nil {
			return err
		}
		if base <= 0 || maxDelay < base {
			return fmt.Errorf("WithBackoff(%v, %v): backoff needs 0 < base <= max", base, maxDelay)
		}
		if c.backoffSet {
			return errors.New("WithBackoff: given twice")
		}
		c.backoff, c.maxBackoff, c.backoffSet = base, maxDelay, true
		return nil
	}
}
