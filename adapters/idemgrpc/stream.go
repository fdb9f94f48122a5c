package idemgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idemkit"
)

// StreamServerInterceptor returns an interceptor that admits each selected
// streaming call once per (principal, method, idempotency key) inside the
// engine's Guard window (idemkit.WithWindow, default 5s), and refuses
// repeats. It is safe for concurrent use.
//
// Streams get claim-once, not replay. A stream's responses are a sequence,
// interleaved with the client's own messages and possibly shaped by them;
// replaying it would mean buffering every message of every stream for the
// retention period, and a client that retries has often consumed part of
// the first stream already, so a replay from the start would hand it
// duplicates. A repeat therefore fails with codes.AlreadyExists, carrying
// an errdetails.RetryInfo with the time left in the window; the client
// decides how to resume. There is no payload fingerprint either: the
// request messages arrive after the claim is made.
//
// What happens to the claim when the handler ends is set by
// idemkit.WithRelease in WithCallOptions (default: kept for the whole
// window; idemkit.ReleaseOnError frees the key when the stream fails).
// Key, principal and store failures map to statuses as in
// UnaryServerInterceptor; so does a missing WithPrincipal.
func StreamServerInterceptor(e *idemkit.Engine, opts ...Option) grpc.StreamServerInterceptor {
	s := newServer(e, opts)
	return s.stream
}

func (s *server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if !s.cfg.selected(ctx, info.FullMethod) {
		return handler(srv, ss)
	}
	key, protect, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	if !protect {
		return handler(srv, ss)
	}
	ran := false
	err = s.e.Guard(ctx, key, func(context.Context) error {
		ran = true
		return handler(srv, ss)
	}, s.callOpts...)
	if ran {
		return err
	}
	if errors.Is(err, idemkit.ErrDuplicate) {
		delay, _ := idemkit.RetryAfter(err)
		return withRetryInfo(codes.AlreadyExists, "idemgrpc: a stream with this idempotency key was already admitted", delay)
	}
	if err != nil {
		return engineStatus(ctx, err)
	}
	return status.Error(codes.Internal, "idemgrpc: stream not run")
}
