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

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/backoff"
	"github.com/idemkit/idemkit/keying"
)

// Client gives outgoing calls idempotency keys and resends them with the
// same key. Build one with NewClient and install its interceptor; it is
// safe for concurrent use.
type Client struct {
	cfg *config
}

// NewClient returns a Client configured by opts. A method selection
// (WithMethods or WithSelector) is required. Every invalid option is
// reported in an error wrapping idemkit.ErrInvalid.
func NewClient(opts ...Option) (*Client, error) {
	cfg, errs := newConfig(clientSide, opts)
	if err := configError(errs...); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg}, nil
}

// UnaryClientInterceptor returns the interceptor that gives every selected
// call an idempotency key (unless its metadata holds one) before the first
// attempt, and resends it with that key (WithRetries). A CallOption
// (WithCallKey, WithoutIdempotency) overrides this for one call. See the
// package doc, # Client retries.
func (c *Client) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return c.unary
}

func (c *Client) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	call, opts, err := callOptions(opts)
	if err != nil {
		return err
	}
	if call.skip {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx = c.withFence(ctx)
	if call.key == "" && !c.cfg.selected(ctx, method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, err = c.withKey(ctx, call.key)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil || attempt >= c.cfg.retries {
			return err
		}
		delay, retry := c.retryDelay(err, attempt)
		if !retry {
			return err
		}
		if werr := sleep(ctx, delay, err); werr != nil {
			return werr
		}
	}
}

// StreamClientInterceptor returns the interceptor that gives every
// selected stream an idempotency key (unless its metadata holds one) and,
// with WithFenceMetadata, the fencing token of the claim in its context.
// A stream is not resent: a retry opens a new stream, with a new key
// unless the caller gives the first one (WithCallKey). A CallOption
// (WithCallKey, WithoutIdempotency) overrides this for one stream.
func (c *Client) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return c.stream
}

func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	call, opts, err := callOptions(opts)
	if err != nil {
		return nil, err
	}
	if call.skip {
		return streamer(ctx, desc, cc, method, opts...)
	}
	ctx = c.withFence(ctx)
	if call.key != "" || c.cfg.selected(ctx, method) {
		if ctx, err = c.withKey(ctx, call.key); err != nil {
			return nil, err
		}
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// withFence adds the fencing token of the claim in ctx to its outgoing
// metadata (WithFenceMetadata), unless the metadata holds one.
func (c *Client) withFence(ctx context.Context) context.Context {
	if c.cfg.fenceKey == "" {
		return ctx
	}
	fence, ok := idemkit.FenceFromContext(ctx)
	if !ok || len(metadata.ValueFromOutgoingContext(ctx, c.cfg.fenceKey)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, c.cfg.fenceKey, keying.FormatFence(fence))
}

// withKey adds the idempotency key to ctx's outgoing metadata: key when
// given (WithCallKey), else a fresh one unless the metadata holds one.
func (c *Client) withKey(ctx context.Context, key string) (context.Context, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	held := md.Get(c.cfg.mdKey)
	switch {
	case key != "" && len(held) > 0:
		return ctx, status.Errorf(codes.InvalidArgument, "idemgrpc: WithCallKey given and %s already in the metadata", c.cfg.mdKey)
	case len(held) > 0:
		return ctx, nil
	case key == "":
		tok, err := keying.NewToken()
		if err != nil {
			return ctx, status.Error(codes.Internal, "idemgrpc: cannot draw an idempotency key")
		}
		key = tok
	}
	return metadata.AppendToOutgoingContext(ctx, c.cfg.mdKey, key), nil
}

// retryDelay says whether a failed attempt is retried and after how long.
// Every wait is bounded by the maximum backoff (plus a fifth as jitter
// after Aborted): a longer RetryInfo delay is not waited.
func (c *Client) retryDelay(err error, attempt int) (time.Duration, bool) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		return backoff.Delay(c.cfg.backoff, c.cfg.maxBackoff, attempt), true
	case codes.Aborted:
		d, ok := retryInfo(st)
		if !ok || d > c.cfg.maxBackoff {
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
