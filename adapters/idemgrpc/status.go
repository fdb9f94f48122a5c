package idemgrpc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idemkit"
)

// pushbackTrailer is the trailer grpc-go's retry policy reads as the
// server's retry delay, in milliseconds.
const pushbackTrailer = "grpc-retry-pushback-ms"

// errNotStored is the status of every repeat of a call whose response was
// too large to keep (idemkit.WithMaxResultSize): the handler ran once and
// does not run again. ResourceExhausted is the code gRPC itself gives a
// message over its size limit; a client cannot fix it by retrying the key.
var errNotStored = status.Error(codes.ResourceExhausted,
	"idemgrpc: the first call with this idempotency key ran, but its response was too large to keep; it does not run again")

// engineStatus maps an error of the engine (the handler did not run) to a
// status. No text of err reaches the client: store errors name keys, and
// the engine's observer has already reported err to the operator.
func engineStatus(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr).Err()
	}
	switch {
	case errors.Is(err, idemkit.ErrInProgress):
		return inProgress(ctx, err)
	case errors.Is(err, idemkit.ErrMismatch):
		return status.Error(codes.FailedPrecondition, "idemgrpc: idempotency key reused with a different request")
	case errors.Is(err, idemkit.ErrUnavailable):
		return status.Error(codes.Unavailable, "idemgrpc: idempotency store unavailable")
	}
	// Anything else (a corrupt record, a store refusing an argument) is the
	// server's problem, never the client's: the request itself was valid.
	return status.Error(codes.Internal, "idemgrpc: idempotency store error")
}

// inProgress builds the Aborted status of a repeat that arrives while the
// first call runs, with the engine's retry hint in a RetryInfo detail and
// in the pushback trailer grpc-go's retry policy honours.
func inProgress(ctx context.Context, err error) error {
	delay, _ := idemkit.RetryAfter(err)
	_ = grpc.SetTrailer(ctx, metadata.Pairs(pushbackTrailer, strconv.FormatInt(delay.Milliseconds(), 10)))
	return withRetryInfo(codes.Aborted, "idemgrpc: a request with this idempotency key is in progress", delay)
}

// withRetryInfo returns a status error carrying delay as RetryInfo.
func withRetryInfo(c codes.Code, msg string, delay time.Duration) error {
	st, err := status.New(c, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}

// retryInfo returns the RetryInfo delay a status carries.
func retryInfo(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}
