package idemconnect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// keySpace is the first part of every key the server gives the engine, so
// no other adapter's keys (idemhttp, idemgrpc) can meet a Connect call's.
const keySpace = "connect"

// Server puts an engine in front of Connect handlers. It is a
// connect.Interceptor: install it on handlers with
// connect.WithInterceptors. It is safe for concurrent use.
type Server struct {
	e   *idemkit.Engine // the view with the server's engine options
	cfg *config
	fp  *keying.Fingerprinter
}

var _ connect.Interceptor = (*Server)(nil)

// NewServer returns a Server over e configured by opts. WithPrincipal and
// at least one WithProcedure are required. Every invalid option, and every
// engine option e would refuse, is reported in an error wrapping
// idemkit.ErrInvalid.
func NewServer(e *idemkit.Engine, opts ...Option) (*Server, error) {
	cfg, errs := newConfig(serverSide, opts)
	if e == nil {
		errs = append([]error{errors.New("nil engine")}, errs...)
	}
	if cfg.principal == nil {
		errs = append(errs, errors.New("no principal function (use WithPrincipal)"))
	}
	if err := configError(errs...); err != nil {
		return nil, err
	}
	view, err := e.With(slices.Concat(cfg.engineOpts, []idemkit.Option{idemkit.WithErrorCodec(errorCodec(cfg.final))})...)
	if err != nil {
		return nil, fmt.Errorf("idemconnect: WithEngineOptions: %w", err)
	}
	return &Server{e: view, cfg: cfg, fp: new(keying.Fingerprinter)}, nil
}

// WrapUnary runs each selected unary call once per (principal, procedure,
// idempotency key) and answers every repeat with the stored response
// message, headers and trailers, or the stored final error, marked with
// the ReplayedHeader. Procedures that are not selected pass through. It
// implements connect.Interceptor; see the package doc for the codes.
func (s *Server) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		if spec.IsClient {
			return nil, connect.NewError(connect.CodeInternal, errors.New("idemconnect: a Server is installed on a client; use a Client"))
		}
		proc, ok := s.cfg.procs[spec.Procedure]
		if !ok {
			return next(ctx, req)
		}
		if err := checkSchema(spec, proc); err != nil {
			return nil, err
		}
		c, err := s.admit(ctx, spec.Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		if c.key == "" {
			return next(ctx, req)
		}
		fp, err := s.fingerprint(spec.Procedure, req.Any())
		if err != nil {
			return nil, err
		}
		return s.do(ctx, c, fp, proc, req, next)
	}
}

// WrapStreamingClient implements connect.Interceptor: a Server installed
// on a client refuses every stream.
func (s *Server) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return &refusedConn{StreamingClientConn: next(ctx, spec),
			err: connect.NewError(connect.CodeInternal, errors.New("idemconnect: a Server is installed on a client; use a Client"))}
	}
}

// checkSchema refuses a call whose procedure's response type (from the
// generated schema, when there is one) is not the one WithProcedure gave:
// its response could be stored but never given back.
func checkSchema(spec connect.Spec, proc procedure) error {
	md, ok := spec.Schema.(protoreflect.MethodDescriptor)
	if !ok || md.Output().FullName() == proc.response {
		return nil
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("idemconnect: %s responds with %s, but WithProcedure gave %s", spec.Procedure, md.Output().FullName(), proc.response))
}

// call is an admitted call: the engine key and the principal's scope.
type call struct {
	key   string
	scope idemkit.Option
}

// admit checks the principal and the key of a selected call. It returns a
// call with an empty key for a call without key that WithOptionalKey lets
// through.
func (s *Server) admit(ctx context.Context, procedure string, header http.Header) (call, error) {
	principal, err := s.cfg.principal(ctx, header)
	if err != nil {
		return call{}, principalError(err)
	}
	if principal == "" {
		return call{}, connect.NewError(connect.CodeUnauthenticated, errors.New("idemconnect: caller not authenticated"))
	}
	k, present, err := httpcore.HeaderKey(header[s.cfg.keyHeader]) // keyHeader is canonical, as header's keys are
	if err != nil {
		// The error names the rule broken, never the key.
		return call{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("idemconnect: %s: %w", s.cfg.keyHeader, err))
	}
	if !present {
		if s.cfg.optionalKey {
			return call{}, nil
		}
		return call{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("idemconnect: missing %s header", s.cfg.keyHeader))
	}
	return call{key: keying.Key(keySpace, procedure, k), scope: idemkit.WithScope(principal)}, nil
}

// principalError is the error of a call whose principal function failed:
// the function's own *connect.Error when it returned one with a code
// other than Unknown, CodeUnauthenticated otherwise. The error's text is
// not sent: it may hold a credential.
func principalError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() != connect.CodeUnknown {
		return ce
	}
	return connect.NewError(connect.CodeUnauthenticated, errors.New("idemconnect: caller not authenticated"))
}

// fingerprint hashes the deterministic encoding of the request message
// with the procedure.
func (s *Server) fingerprint(procedure string, msg any) (string, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return "", connect.NewError(connect.CodeInternal, fmt.Errorf("idemconnect: request of %s is %T, not a proto.Message", procedure, msg))
	}
	buf := marshalBufs.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledBuf {
			marshalBufs.Put(buf)
		}
	}()
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		return "", connect.NewError(connect.CodeInternal, errors.New("idemconnect: cannot marshal the request"))
	}
	*buf = b
	return s.fp.SumRaw("", procedure, nil, b), nil
}

// marshalBufs holds the buffers requests are marshalled into for their
// fingerprint, which does not keep them.
// A buffer grown past maxPooledBuf by a large request is dropped.
var marshalBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuf = 64 << 10

// outcome is what the handler returned, when it ran.
type outcome struct {
	ran  bool
	resp connect.AnyResponse
	err  error
}

// do runs the handler through the engine and turns the result into a
// response or an error.
func (s *Server) do(ctx context.Context, c call, fp string, proc procedure, req connect.AnyRequest, next connect.UnaryFunc) (connect.AnyResponse, error) {
	var out outcome
	res, err := s.e.Do(ctx, c.key, fp, func(ctx context.Context) ([]byte, error) {
		out.ran = true
		out.resp, out.err = next(ctx, req)
		if out.err != nil {
			return nil, out.err
		}
		header, trailer := callHeaders(ctx)
		return encodeResponse(out.resp, header, trailer, proc.response)
	}, c.scope)
	if out.ran {
		// The handler's own outcome, even when it could not be recorded:
		// work that was done is never hidden.
		return out.resp, out.err
	}
	if err != nil && !res.Replayed {
		return nil, engineError(ctx, err, req.Peer().Protocol)
	}
	if err == errCorruptError { // DecodeError's own value, returned as is
		return nil, err // not a replay: the stored outcome cannot be given back
	}
	if err != nil {
		if errors.Is(err, idemkit.ErrResultTooLarge) {
			return nil, replayed(connect.NewError(connect.CodeResourceExhausted, errors.New(errNotStoredText)))
		}
		return nil, replayed(err) // a stored final error
	}
	resp, derr := decodeResponse(res.Value, proc)
	if derr != nil {
		// Not a replay: the stored outcome cannot be given back.
		return nil, connect.NewError(connect.CodeInternal, derr)
	}
	resp.Header()[replayedKey] = []string{"true"}
	return resp, nil
}

// replayedKey is ReplayedHeader in canonical form, to set without
// canonicalising it on every replay.
var replayedKey = http.CanonicalHeaderKey(ReplayedHeader)

// errNotStoredText is the message of every repeat of a call whose
// response was too large to keep (idemkit.WithMaxResultSize): the handler
// ran once and does not run again. ResourceExhausted is the code gRPC
// gives a message over its size limit; retrying the key cannot fix it.
const errNotStoredText = "idemconnect: the first call with this idempotency key ran, but its response was too large to keep; it does not run again"

// replayed marks a replayed error with the ReplayedHeader.
func replayed(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeUnknown, err)
	}
	ce.Meta().Set(ReplayedHeader, "true")
	return ce
}

// callHeaders returns the response headers and trailers the handler set
// through the call info of ctx (connect.CallInfoForHandlerContext), as the
// "simple" handlers do; nil when there are none.
func callHeaders(ctx context.Context) (header, trailer http.Header) {
	info, ok := connect.CallInfoForHandlerContext(ctx)
	if !ok {
		return nil, nil
	}
	return info.ResponseHeader(), info.ResponseTrailer()
}
