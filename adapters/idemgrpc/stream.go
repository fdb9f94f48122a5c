package idemgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idemkit"
)

// StreamServerInterceptor returns the interceptor that admits each
// selected streaming call once per (principal, method, idempotency key)
// inside the engine's Guard window, and refuses repeats with
// codes.AlreadyExists. Streams get claim-once, not replay; see the package
// doc, # Streams. Methods that are not selected pass through untouched.
func (s *Server) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return s.stream
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if !s.cfg.selected(ctx, info.FullMethod) {
		return handler(srv, ss)
	}
	c, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	if c.key == "" {
		return handler(srv, ss)
	}
	ran := false
	err = s.e.Guard(ctx, c.key, func(context.Context) error {
		ran = true
		return handler(srv, ss)
	}, c.scope)
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
