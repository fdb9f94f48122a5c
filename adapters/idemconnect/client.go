package idemconnect

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/backoff"
	"github.com/idemkit/idemkit/keying"
)

// Client gives outgoing calls idempotency keys and resends them with the
// same key. It is a connect.Interceptor: install it on clients with
// connect.WithInterceptors. It is safe for concurrent use.
type Client struct {
	cfg *config
}

var _ connect.Interceptor = (*Client)(nil)

// NewClient returns a Client configured by opts. At least one
// WithProcedure is required. Every invalid option is reported in an error
// wrapping idemkit.ErrInvalid.
func NewClient(opts ...Option) (*Client, error) {
	cfg, errs := newConfig(clientSide, opts)
	if err := configError(errs...); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg}, nil
}

// errClientOnHandler is the error of a Client installed on a handler.
var errClientOnHandler = errors.New("idemconnect: a Client is installed on a handler; use a Server")

// WrapUnary gives every selected call an idempotency key, unless its
// request header holds one, before the first attempt, and resends it
// with that key (WithRetries): every attempt of one call carries the same
// key, so the server runs the handler once and replays to the others. It
// implements connect.Interceptor.
func (c *Client) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		if !spec.IsClient {
			return nil, connect.NewError(connect.CodeInternal, errClientOnHandler)
		}
		c.setFence(ctx, req.Header())
		if _, ok := c.cfg.procs[spec.Procedure]; !ok {
			return next(ctx, req)
		}
		if err := c.setKey(req.Header()); err != nil {
			return nil, err
		}
		for attempt := 0; ; attempt++ {
			resp, err := next(ctx, req)
			if err == nil || attempt >= c.cfg.retries {
				return resp, err
			}
			delay, retry := c.retryDelay(err, attempt)
			if !retry {
				return nil, err
			}
			if werr := sleep(ctx, delay, err); werr != nil {
				return nil, werr
			}
		}
	}
}

// WrapStreamingClient gives every selected stream an idempotency key,
// unless its request header holds one. A stream is not resent: a retry
// opens a new stream, with a new key unless the caller sets the first
// one in the request header. It implements connect.Interceptor.
func (c *Client) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		c.setFence(ctx, conn.RequestHeader())
		if _, ok := c.cfg.procs[spec.Procedure]; !ok {
			return conn
		}
		if err := c.setKey(conn.RequestHeader()); err != nil {
			return &refusedConn{StreamingClientConn: conn, err: err}
		}
		return conn
	}
}

// WrapStreamingHandler implements connect.Interceptor: a Client installed
// on a handler refuses every stream.
func (c *Client) WrapStreamingHandler(connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(context.Context, connect.StreamingHandlerConn) error {
		return connect.NewError(connect.CodeInternal, errClientOnHandler)
	}
}

// setFence adds the fencing token of the claim in ctx to h
// (WithFenceHeader), unless h holds one.
func (c *Client) setFence(ctx context.Context, h http.Header) {
	if c.cfg.fenceHeader == "" || len(h.Values(c.cfg.fenceHeader)) > 0 {
		return
	}
	if fence, ok := idemkit.FenceFromContext(ctx); ok {
		h.Set(c.cfg.fenceHeader, keying.FormatFence(fence))
	}
}

// setKey checks the key the caller set in h, or sets a fresh one.
func (c *Client) setKey(h http.Header) error {
	if _, present, err := httpcore.HeaderKey(h.Values(c.cfg.keyHeader)); present {
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
		return nil
	}
	tok, err := keying.NewToken()
	if err != nil {
		return connect.NewError(connect.CodeInternal, errors.New("idemconnect: cannot draw an idempotency key"))
	}
	h.Set(c.cfg.keyHeader, tok)
	return nil
}

// retryDelay says whether a failed attempt is retried and after how long.
// Every wait is bounded by the maximum backoff (plus a fifth as jitter
// after Aborted): a longer RetryInfo delay is not waited.
func (c *Client) retryDelay(err error, attempt int) (time.Duration, bool) {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		return backoff.Delay(c.cfg.backoff, c.cfg.maxBackoff, attempt), true
	case connect.CodeAborted:
		d, ok := RetryDelay(err)
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
// deadline comes before the wait would end, and ctx's error when ctx ends
// during the wait.
func sleep(ctx context.Context, d time.Duration, last error) error {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return last
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		code := connect.CodeCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = connect.CodeDeadlineExceeded
		}
		return connect.NewError(code, ctx.Err())
	case <-t.C:
		return nil
	}
}
