package idemconnect

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/idemkit/idemkit"
)

// WrapStreamingHandler admits each selected streaming call once per
// (principal, procedure, idempotency key) inside the engine's Guard
// window, and refuses repeats with connect.CodeAlreadyExists carrying an
// errdetails.RetryInfo with the time left in the window. Streams get
// claim-once, not replay; see the package doc, # Streams. Procedures that
// are not selected pass through. It implements connect.Interceptor.
func (s *Server) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		spec := conn.Spec()
		if _, ok := s.cfg.procs[spec.Procedure]; !ok {
			return next(ctx, conn)
		}
		c, err := s.admit(ctx, spec.Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		if c.key == "" {
			return next(ctx, conn)
		}
		ran := false
		err = s.e.Guard(ctx, c.key, func(ctx context.Context) error {
			ran = true
			return next(ctx, conn)
		}, c.scope)
		if ran {
			return err
		}
		if errors.Is(err, idemkit.ErrDuplicate) {
			delay, _ := idemkit.RetryAfter(err)
			return withRetryInfo(connect.CodeAlreadyExists, "idemconnect: a stream with this idempotency key was already admitted", delay)
		}
		if err != nil {
			return engineError(ctx, err, conn.Peer().Protocol)
		}
		return connect.NewError(connect.CodeInternal, errors.New("idemconnect: stream not run"))
	}
}

// refusedConn is a client stream that fails every operation with err: an
// interceptor installed on the wrong side.
type refusedConn struct {
	connect.StreamingClientConn
	err error
}

func (c *refusedConn) Send(any) error    { return c.err }
func (c *refusedConn) Receive(any) error { return c.err }
