package idemconnect

import (
	"context"
	"errors"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idemkit"
)

// pushbackTrailer is the trailer grpc-go's retry policy reads as the
// server's retry delay, in milliseconds.
const pushbackTrailer = "Grpc-Retry-Pushback-Ms"

// engineError maps an error of the engine (the handler did not run) to a
// connect error. No text of err reaches the client: store errors name
// keys, and the engine's observer has already reported err. A repeat in
// progress over gRPC or gRPC-Web also gets the pushback trailer that
// grpc-go's retry policy honours, as idemgrpc sets it.
func engineError(ctx context.Context, err error, protocol string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		code := connect.CodeCanceled
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			code = connect.CodeDeadlineExceeded
		}
		return connect.NewError(code, ctxErr)
	}
	switch {
	case errors.Is(err, idemkit.ErrInProgress):
		delay, _ := idemkit.RetryAfter(err)
		ce := withRetryInfo(connect.CodeAborted, "idemconnect: a request with this idempotency key is in progress", delay)
		if protocol == connect.ProtocolGRPC || protocol == connect.ProtocolGRPCWeb {
			ce.Meta().Set(pushbackTrailer, strconv.FormatInt(delay.Milliseconds(), 10))
		}
		return ce
	case errors.Is(err, idemkit.ErrMismatch):
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("idemconnect: idempotency key reused with a different request"))
	case errors.Is(err, idemkit.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, errors.New("idemconnect: idempotency store unavailable"))
	}
	// Anything else (a corrupt record, a store refusing an argument) is the
	// server's problem, never the client's: the request itself was valid.
	return connect.NewError(connect.CodeInternal, errors.New("idemconnect: idempotency store error"))
}

// withRetryInfo returns an error of code carrying delay as an
// errdetails.RetryInfo detail and, for plain HTTP clients, as a
// Retry-After header in whole seconds, rounded up.
func withRetryInfo(code connect.Code, msg string, delay time.Duration) *connect.Error {
	ce := connect.NewError(code, errors.New(msg))
	if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		ce.AddDetail(d)
	}
	ce.Meta().Set("Retry-After", strconv.FormatInt(int64((delay+time.Second-1)/time.Second), 10))
	return ce
}

// RetryDelay returns the delay an error's errdetails.RetryInfo detail
// asks for, and whether it carries one: a client waits that long before
// resending a call refused with connect.CodeAborted.
func RetryDelay(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, false
	}
	for _, d := range ce.Details() {
		v, verr := d.Value()
		if verr != nil {
			continue
		}
		if ri, ok := v.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}
