package idemgrpc

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idemkit/keying"
)

// UnaryClientInterceptor returns an interceptor that gives every selected
// call (WithMethods, WithSelector) an idempotency key, and keeps it when the
// call is resent. It is safe for concurrent use.
//
// A call whose outgoing metadata already holds the key entry keeps it;
// otherwise a fresh one from keying.NewToken is added, once, before any
// attempt. Both kinds of retry therefore resend the same key, so a server
// running UnaryServerInterceptor runs the handler once and replays its
// response:
//
//   - grpc-go's own retry policy (a service config retryPolicy), which
//     retries below the interceptor with the metadata the interceptor set.
//     grpc-go only retries an attempt whose response was trailers-only; it
//     honours the grpc-retry-pushback-ms trailer the server sets with
//     codes.Aborted.
//   - the interceptor's own bounded retries (WithRetries), on
//     codes.Unavailable with jittered exponential backoff (WithBackoff),
//     and on codes.Aborted carrying an errdetails.RetryInfo, after the
//     delay it gives; a RetryInfo delay longer than the maximum backoff
//     (WithBackoff) is not waited. A wait that cannot end before ctx's
//     deadline is not started: the last error is returned. When ctx ends
//     during a wait the call fails with its status (Canceled or
//     DeadlineExceeded).
//
// Using both multiplies the attempts. Methods that are not selected pass
// through untouched. An invalid option makes every selected call fail with
// codes.Internal; an invalid method selection (see WithMethods) makes every
// call fail so.
func UnaryClientInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	cfg := newConfig(opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if !cfg.selected(ctx, method) {
			return invoker(ctx, method, req, reply, cc, callOpts...)
		}
		if cfg.err != nil {
			return status.Error(codes.Internal, cfg.err.Error())
		}
		ctx, err := withKey(ctx, cfg.mdKey)
		if err != nil {
			return err
		}
		for attempt := 0; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, callOpts...)
			if err == nil || attempt >= cfg.retries {
				return err
			}
			delay, retry := cfg.retryDelay(err, attempt)
			if !retry {
				return err
			}
			if werr := sleep(ctx, delay, err); werr != nil {
				return werr
			}
		}
	}
}

// withKey adds a fresh idempotency key to ctx's outgoing metadata unless it
// holds one.
func withKey(ctx context.Context, name string) (context.Context, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if len(md.Get(name)) > 0 {
		return ctx, nil
	}
	tok, err := keying.NewToken()
	if err != nil {
		return ctx, status.Errorf(codes.Internal, "idemgrpc: new idempotency key: %v", err)
	}
	return metadata.AppendToOutgoingContext(ctx, name, tok), nil
}

// retryDelay says whether a failed attempt is retried and after how long.
// Every wait is bounded by the maximum backoff (plus a fifth as jitter
// after Aborted): a longer RetryInfo delay is not waited.
func (c *config) retryDelay(err error, attempt int) (time.Duration, bool) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		d := c.backoffCeiling(attempt)
		return d/2 + rand.N(d/2+1), true
	case codes.Aborted:
		d, ok := retryInfo(st)
		if !ok || d > c.maxBackoff {
			return 0, false
		}
		jitter := rand.N(d/5 + 1)
		if d > math.MaxInt64-jitter {
			return math.MaxInt64, true
		}
		return d + jitter, true
	}
	return 0, false
}

// backoffCeiling returns the base backoff doubled attempt times, capped at
// the maximum without overflowing.
func (c *config) backoffCeiling(attempt int) time.Duration {
	d := c.backoff
	for range attempt {
		if d > c.maxBackoff/2 {
			return c.maxBackoff
		}
		d *= 2
	}
	return min(d, c.maxBackoff)
}

// sleep waits d and returns nil. It returns last at once when ctx's
// deadline comes before the wait would end, and ctx's status when ctx ends
// during the wait.
func sleep(ctx context.Context, d time.Duration, last error) error {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return last
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return nil
	}
}
