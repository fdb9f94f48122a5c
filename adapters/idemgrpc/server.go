package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// keySpace is the first part of every key the server gives the engine, so
// no other adapter's keys (idemhttp, idemfunc) can meet a gRPC call's.
const keySpace = "grpc"

// Server puts an engine in front of gRPC services. Build one with
// NewServer and install its interceptors; it is safe for concurrent use.
type Server struct {
	e   *idemkit.Engine // the view with the server's engine options
	cfg *config
	fp  *keying.Fingerprinter
}

// NewServer returns a Server over e configured by opts. WithPrincipal and a
// method selection (WithMethods or WithSelector) are required. Every
// invalid option, and every engine option e would refuse, is reported in
// an error wrapping idemkit.ErrInvalid.
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
	view, err := e.With(slices.Concat(cfg.engineOpts, []idemkit.Option{idemkit.WithErrorCodec(statusCodec(cfg.final))})...)
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: WithEngineOptions: %w", err)
	}
	return &Server{e: view, cfg: cfg, fp: new(keying.Fingerprinter)}, nil
}

// UnaryServerInterceptor returns the interceptor that runs each selected
// unary call once per (principal, method, idempotency key) and answers
// every repeat with the stored response or final status, marked with the
// ReplayedHeader. Methods that are not selected pass through untouched.
// See the package doc for the status codes.
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return s.unary
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !s.cfg.selected(ctx, info.FullMethod) {
		return handler(ctx, req)
	}
	c, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if c.key == "" {
		return handler(ctx, req)
	}
	fp, err := s.fingerprint(info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	return s.do(ctx, c, fp, req, handler)
}

// call is an admitted call: the engine key and the principal's scope.
type call struct {
	key   string
	scope idemkit.Option
}

// admit checks the principal and the key of a selected call. It returns a
// call with an empty key for a call without key that WithOptionalKey lets
// through.
func (s *Server) admit(ctx context.Context, fullMethod string) (call, error) {
	principal, err := s.cfg.principal(ctx)
	if err != nil {
		return call{}, principalStatus(err)
	}
	if principal == "" {
		return call{}, status.Error(codes.Unauthenticated, "idemgrpc: caller not authenticated")
	}
	k, present, err := incomingKey(ctx, s.cfg.mdKey)
	if err != nil {
		return call{}, err
	}
	if !present {
		if s.cfg.optionalKey {
			return call{}, nil
		}
		return call{}, status.Errorf(codes.InvalidArgument, "idemgrpc: missing %s metadata", s.cfg.mdKey)
	}
	return call{key: keying.Key(keySpace, fullMethod, k), scope: idemkit.WithScope(principal)}, nil
}

// principalStatus is the status of a call whose principal function failed:
// the function's own status when it returned one, Unauthenticated
// otherwise. The error's text is not sent: it may hold a credential. Of an
// error wrapping a status only that status is sent, not the wrapping text
// (status.FromError would put the whole err.Error() in the message).
func principalStatus(err error) error {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil && st.Code() != codes.Unknown && st.Code() != codes.OK {
			return st.Err()
		}
	}
	return status.Error(codes.Unauthenticated, "idemgrpc: caller not authenticated")
}

// incomingKey reads the idempotency key from the request metadata and
// validates it.
func incomingKey(ctx context.Context, name string) (key string, present bool, err error) {
	vals := metadata.ValueFromIncomingContext(ctx, name)
	switch {
	case len(vals) == 0:
		return "", false, nil
	case len(vals) > 1:
		return "", true, status.Errorf(codes.InvalidArgument, "idemgrpc: %s sent %d times", name, len(vals))
	}
	if err := checkKey(vals[0]); err != nil {
		return "", true, status.Errorf(codes.InvalidArgument, "idemgrpc: %s: %v", name, err)
	}
	return vals[0], true, nil
}

// checkKey applies the rule every transport shares (keying.CheckClientKey):
// 1 to MaxKeyLen bytes of printable ASCII. Its error never quotes the key.
func checkKey(k string) error { return keying.CheckClientKey(k) }

// fingerprint hashes the deterministic encoding of req with the method.
func (s *Server) fingerprint(fullMethod string, req any) (string, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return "", status.Errorf(codes.Internal, "idemgrpc: request of %s is %T, not a proto.Message", fullMethod, req)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "", status.Error(codes.Internal, "idemgrpc: cannot marshal the request")
	}
	return s.fp.SumRaw("", fullMethod, nil, b), nil
}

// outcome is what the handler returned, when it ran.
type outcome struct {
	ran  bool
	resp any
	err  error
}

// do runs the handler through the engine and turns the result into a
// response or a status.
func (s *Server) do(ctx context.Context, c call, fp string, req any, handler grpc.UnaryHandler) (any, error) {
	var out outcome
	res, err := s.e.Do(ctx, c.key, fp, func(ctx context.Context) ([]byte, error) {
		out.ran = true
		out.resp, out.err = handler(ctx, req)
		if out.err != nil {
			return nil, out.err
		}
		m, ok := out.resp.(proto.Message)
		if !ok {
			return nil, fmt.Errorf("idemgrpc: response is %T, not a proto.Message", out.resp)
		}
		return encodeResponse(m)
	}, c.scope)
	if out.ran {
		// The handler's own outcome, even when it could not be recorded:
		// work that was done is never hidden.
		return out.resp, out.err
	}
	if err != nil && !res.Replayed {
		return nil, engineStatus(ctx, err)
	}
	if err == errCorruptStatus { // DecodeError's own value, which the engine returns as is
		// Not a replay: the stored outcome cannot be given back.
		return nil, err
	}
	if err != nil {
		markReplayed(ctx)
		if errors.Is(err, idemkit.ErrResultTooLarge) {
			return nil, errNotStored // the terminal record of a response too large to keep
		}
		return nil, err // a stored final status
	}
	m, derr := decodeResponse(res.Value, s.cfg.types)
	if derr != nil {
		// Not a replay: the stored outcome cannot be given back.
		return nil, status.Error(codes.Internal, derr.Error())
	}
	markReplayed(ctx)
	return m, nil
}

// markReplayed sets the replay header. It is best effort: outside a real
// gRPC stream (a direct call in a test) there is no header to set.
func markReplayed(ctx context.Context) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedHeader, "true"))
}
