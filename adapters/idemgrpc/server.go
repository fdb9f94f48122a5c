package idemgrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// server holds what both server interceptors share.
type server struct {
	e        *idemkit.Engine
	cfg      *config
	fp       *keying.Fingerprinter
	callOpts []idemkit.Option
}

func newServer(e *idemkit.Engine, opts []Option) *server {
	cfg := newConfig(opts)
	switch {
	case e == nil:
		cfg.invalid("nil engine")
	case cfg.principal == nil:
		if cfg.err == nil {
			cfg.err = errNoPrincipal
		}
	}
	if err := idemkit.CheckOptions(cfg.callOpts...); err != nil {
		cfg.invalid("call option: %v", err)
	}
	callOpts := append(append([]idemkit.Option(nil), cfg.callOpts...), idemkit.WithErrorCodec(statusCodec(cfg.final)))
	return &server{e: e, cfg: cfg, fp: new(keying.Fingerprinter), callOpts: callOpts}
}

// UnaryServerInterceptor returns an interceptor that runs each selected
// unary call once per (principal, method, idempotency key) and answers every
// repeat with the stored outcome. It is safe for concurrent use.
//
// The first call with a key runs the handler. Its response is stored (type
// name and bytes) and every repeat gets it back, rebuilt through the type
// resolver, with the response header ReplayedHeader set to "true". A
// handler error whose code is final (WithFinalCodes) is stored and replayed
// as the same status; any other error releases the key so a retry runs the
// handler again.
//
// The payload fingerprint is the deterministic protobuf encoding of the
// request together with the full method name; a repeat with a different
// payload fails with codes.FailedPrecondition. Other outcomes map to
// statuses as follows:
//
//   - no key (unless WithOptionalKey), or a key that is empty, longer than
//     MaxKeyLen bytes, not printable ASCII, or sent twice: InvalidArgument;
//   - the first call still running: Aborted, with an errdetails.RetryInfo
//     detail and a grpc-retry-pushback-ms trailer giving the retry delay
//     (idemkit.WithWait in WithCallOptions makes repeats wait instead);
//   - the store down under the fail-closed policy: Unavailable (with
//     idemkit.WithFailureMode(idemkit.FailOpen) the handler runs unguarded);
//   - the principal function failing: Unauthenticated.
//
// Once the handler has run, its own outcome is returned even when it could
// not be recorded (store failure, lost lease, result over the size cap):
// the interceptor never hides work that was done. Such an outcome is not
// replayed: a response over the engine's size cap (idemkit.WithMaxResultSize,
// default 1 MiB) releases the key at once, and a retry runs the handler
// again; set the cap above the largest response of a selected method.
//
// A stored response the interceptor cannot rebuild (its type is unknown to
// the resolver after a deploy, or the record is corrupt) fails with
// Internal, without the replay header; the handler does not run again.
//
// Without WithPrincipal (or with a nil engine or an invalid option) the
// interceptor does not run anything unprotected: every selected call fails
// with codes.Internal and a message naming the configuration error.
// Methods that are not selected pass through untouched.
func UnaryServerInterceptor(e *idemkit.Engine, opts ...Option) grpc.UnaryServerInterceptor {
	s := newServer(e, opts)
	return s.unary
}

func (s *server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !s.cfg.selected(ctx, info.FullMethod) {
		return handler(ctx, req)
	}
	key, protect, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if !protect {
		return handler(ctx, req)
	}
	fp, err := s.fingerprint(info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	return s.do(ctx, key, fp, req, handler)
}

// admit checks the configuration, the principal and the key of a selected
// call. It returns the engine key, or protect false for a call without key
// that WithOptionalKey lets through.
func (s *server) admit(ctx context.Context, fullMethod string) (key string, protect bool, err error) {
	if s.cfg.err != nil {
		return "", false, status.Error(codes.Internal, s.cfg.err.Error())
	}
	principal, err := s.cfg.principal(ctx)
	if err != nil {
		return "", false, status.Errorf(codes.Unauthenticated, "idemgrpc: principal: %v", err)
	}
	k, present, err := incomingKey(ctx, s.cfg.mdKey)
	if err != nil {
		return "", false, err
	}
	if !present {
		if s.cfg.optionalKey {
			return "", false, nil
		}
		return "", false, status.Errorf(codes.InvalidArgument, "idemgrpc: missing %s metadata", s.cfg.mdKey)
	}
	return keying.Key(principal, fullMethod, k), true, nil
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

// checkKey refuses a key that is empty, longer than MaxKeyLen bytes or not
// printable ASCII.
func checkKey(k string) error {
	if k == "" {
		return errors.New("empty key")
	}
	if len(k) > MaxKeyLen {
		return fmt.Errorf("key of %d bytes exceeds %d", len(k), MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return fmt.Errorf("non-printable byte 0x%02x at %d", k[i], i)
		}
	}
	return nil
}

// fingerprint hashes the deterministic encoding of req with the method.
func (s *server) fingerprint(fullMethod string, req any) (string, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return "", status.Errorf(codes.Internal, "idemgrpc: request of %s is %T, not a proto.Message", fullMethod, req)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "", status.Errorf(codes.Internal, "idemgrpc: marshal request: %v", err)
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
func (s *server) do(ctx context.Context, key, fp string, req any, handler grpc.UnaryHandler) (any, error) {
	var out outcome
	res, err := s.e.Do(ctx, key, fp, func(ctx context.Context) ([]byte, error) {
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
	}, s.callOpts...)
	if out.ran {
		return out.resp, out.err
	}
	if err != nil && !res.Replayed {
		return nil, engineStatus(ctx, err)
	}
	if err != nil {
		markReplayed(ctx)
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
