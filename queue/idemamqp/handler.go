package idemamqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/queue/internal/delivery"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Func processes one message and returns the result to record for its
// key. An error asks for redelivery unless it is final (WithErrorCodec,
// WithFinal); so does a panic, which the Handler recovers.
type Func func(ctx context.Context, d *amqp.Delivery) ([]byte, error)

// Handler runs a Func at most once per message key and acknowledges each
// delivery accordingly. The deliveries must come from a consumer with
// manual acknowledgements (autoAck false). It is safe for concurrent use;
// build one per consumer at start-up.
type Handler struct {
	p        *delivery.Processor
	fn       Func
	cfg      config
	attempts attempts
	retry    *retryQueues // nil: failed deliveries are held in the loop
}

// NewHandler returns a Handler that runs fn once per message key, guarded
// by e. name is the Handler's own key space (1 to 64 bytes of printable
// ASCII, stable across deploys): two consumers of one message, with
// different names, process it once each. It returns an error wrapping
// idemkit.ErrInvalid for a nil engine or fn, a bad name or an invalid
// option.
func NewHandler(e *idemkit.Engine, name string, fn Func, opts ...Option) (*Handler, error) {
	cfg := defaultConfig()
	var errs []error
	if fn == nil {
		errs = append(errs, errors.New("nil handler function"))
	}
	errs = append(errs, options.Collect(&cfg, opts)...)
	if err := cfg.payloadFingerprint(); err != nil {
		errs = append(errs, err)
	}
	if cfg.retryConn != nil {
		if n := RetryQueueName(cfg.retryQueue, steps(cfg.backoff)[len(steps(cfg.backoff))-1]); len(n) > maxQueueName {
			errs = append(errs, fmt.Errorf("WithRetryQueue(conn, %q): queue name too long for its delay queues (%s is over %d bytes)", cfg.retryQueue, n, maxQueueName))
		}
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemamqp: %w", err)
	}
	dcfg := delivery.Config{Codec: cfg.codec, Final: cfg.final, Backoff: cfg.backoff, RefuseMismatch: cfg.fingerprint != nil}
	p, err := delivery.New(e, "amqp", name, dcfg, cfg.engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemamqp: %w", err)
	}
	h := &Handler{p: p, fn: fn, cfg: cfg}
	if cfg.retryConn != nil {
		h.retry = newRetryQueues(cfg.retryConn, cfg.retryQueue, cfg.backoff)
	}
	return h, nil
}

// RetryQueues returns the names of the delay queues the Handler
// republishes failed deliveries to (WithRetryQueue), one per back-off
// step, whether declared yet or not; nil without WithRetryQueue. The
// Handler declares each on first use; delete them once the consumer is
// retired and they are empty.
func (h *Handler) RetryQueues() []string {
	if h.retry == nil {
		return nil
	}
	return h.retry.names()
}

// Close closes the channel the Handler publishes to its delay queues
// on, if it opened one. The Handler opens it again if used after Close.
func (h *Handler) Close() error {
	if h.retry == nil {
		return nil
	}
	return h.retry.close()
}

// Action is how a delivery was acknowledged.
type Action int

const (
	// Ack: processed now, or earlier (a replay).
	Ack Action = iota
	// Requeue: Nack with requeue, after Outcome.Delay.
	Requeue
	// Reject: Nack without requeue (dead-lettered where the queue has a
	// dead-letter exchange).
	Reject
	// Republish: a copy was published to the delay queue of
	// Outcome.Delay and confirmed, then the delivery was acked; the copy
	// comes back to the queue when the delay has passed (WithRetryQueue).
	Republish
)

// ErrPanic is wrapped by the Outcome.Err of a delivery whose handler
// panicked; the error is a *PanicError.
var ErrPanic = delivery.ErrPanic

// PanicError is a recovered panic of the handler: its value and stack.
type PanicError = delivery.PanicError

// String returns "ack", "requeue", "reject" or "republish".
func (a Action) String() string {
	if a < Ack || a > Republish {
		return fmt.Sprintf("Action(%d)", int(a))
	}
	return [...]string{"ack", "requeue", "reject", "republish"}[a]
}

// Outcome is what the Handler did with one delivery.
type Outcome struct {
	// Action is the acknowledgement sent.
	Action Action
	// Delay is how long the delivery was held before it was requeued
	// (Requeue), or how long its copy waits in a delay queue (Republish).
	Delay time.Duration
	// Ran reports that fn ran for this delivery.
	Ran bool
	// Replayed reports that a recorded outcome answered: fn did not run.
	Replayed bool
	// Redelivered is the delivery's flag: the broker delivered it before.
	// It is reported, not trusted: a first delivery can be a duplicate
	// publication, and a redelivery may find nothing recorded, so the
	// store decides.
	Redelivered bool
	// Attempt is the delivery's attempt number (see the package doc).
	Attempt int
	// Panicked reports that fn panicked; Err wraps ErrPanic.
	Panicked bool
	// Exhausted reports that fn failed on the last attempt allowed
	// (WithMaxAttempts): the delivery was rejected without requeue.
	Exhausted bool
	// Mismatch reports that the key was first seen with another payload
	// (see WithFingerprint).
	Mismatch bool
	// Err is why the message was not acked, or a failure to record the
	// result or to send the acknowledgement.
	Err error
}

// Handle processes d: it claims the message's key, runs fn when admitted,
// records the result and acknowledges the delivery (see the package doc
// for each case). A delivery to retry later is republished to a delay
// queue (WithRetryQueue) or, without one, held for the delay (bounded by
// ctx), then requeued, so Handle returns once the delivery is settled.
func (h *Handler) Handle(ctx context.Context, d amqp.Delivery) Outcome {
	r := h.request(&d)
	return h.settle(ctx, &d, r, h.p.One(ctx, r), false)
}

// Serve handles deliveries one by one until the channel closes (the AMQP
// channel or connection closed: reconnect and Serve again; it returns
// nil) or ctx ends (it returns ctx.Err(); deliveries not yet handled are
// requeued by the broker when their channel closes). Run several Serve
// loops on one channel, with a prefetch (Qos) to match, to process
// deliveries concurrently.
func (h *Handler) Serve(ctx context.Context, deliveries <-chan amqp.Delivery) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				return nil
			}
			if err := ctx.Err(); err != nil { // select picks at random: leave d to the broker
				return err
			}
			h.Handle(ctx, d)
		}
	}
}

// request describes d for the delivery rules. A panicking key or
// fingerprint function is a key error: the delivery is rejected.
func (h *Handler) request(d *amqp.Delivery) (r delivery.Request) {
	r.Run = func(ctx context.Context) ([]byte, error) { return h.fn(ctx, d) }
	defer func() {
		if x := recover(); x != nil {
			r.Key, r.KeyErr = "", fmt.Errorf("key or fingerprint function panicked: %v", x)
		}
		r.Attempt = h.attempts.of(d, r.Key)
	}()
	r.Key, r.KeyErr = h.cfg.key(d)
	switch {
	case r.KeyErr != nil:
	case h.cfg.fingerprint != nil:
		var err error
		if r.Fingerprint, err = h.cfg.fingerprint(d); err != nil {
			r.KeyErr = fmt.Errorf("fingerprint: %w", err)
		}
	default:
		r.Fingerprint = delivery.Digest(d.Body)
	}
	return r
}

// hold waits d, or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// republishes reports whether a retry after delay goes to a delay queue,
// rather than being held in the loop: there are delay queues, and the
// delay is not zero (WithRetryDelay(0) requeues at once).
func (h *Handler) republishes(delay time.Duration) bool {
	return h.retry != nil && delay > 0 && h.retry.step(delay) > 0
}

// settle sends the acknowledgement a verdict for the request r calls for.
// A retry is republished to its delay queue, or, without one or when the
// copy is not confirmed, held for its delay (unless held says the caller
// did), then requeued.
func (h *Handler) settle(ctx context.Context, d *amqp.Delivery, r delivery.Request, v delivery.Verdict, held bool) Outcome {
	out := Outcome{Ran: v.Ran, Replayed: v.Replayed, Redelivered: d.Redelivered, Attempt: r.Attempt,
		Panicked: v.Panicked, Exhausted: v.Exhausted, Mismatch: v.Mismatch, Err: v.Err}
	var err error
	switch v.Action {
	case delivery.Ack:
		out.Action = Ack
		err = d.Ack(false)
	case delivery.Retry:
		out.Action, out.Delay = Requeue, v.Delay
		if h.republishes(v.Delay) {
			failed := r.Attempt - 1 // a retry that is no fault of the message does not count
			if v.Ran {
				failed = r.Attempt
			}
			step := h.retry.step(v.Delay)
			perr := h.retry.publish(ctx, d, step, failed)
			if perr == nil {
				out.Action, out.Delay = Republish, step
				err = d.Ack(false)
				break
			}
			out.Err = errors.Join(out.Err, fmt.Errorf("idemamqp: republish for a retry, requeued instead: %w", perr))
		}
		if !held {
			hold(ctx, v.Delay)
		}
		// Count the attempt before the requeue: the redelivery can reach
		// another Serve loop of this Handler before Nack returns.
		h.attempts.settled(r, v, true)
		err = d.Nack(false, true)
	case delivery.Drop:
		out.Action = Reject
		err = d.Nack(false, false)
	}
	if err != nil {
		out.Err = errors.Join(out.Err, fmt.Errorf("idemamqp: %s: %w", out.Action, err))
	}
	if out.Action != Requeue {
		h.attempts.settled(r, v, false)
	}
	h.log(d, out)
	if h.cfg.report != nil {
		h.cfg.report(ctx, d, out)
	}
	return out
}

// log reports outcomes an operator must see: a result not recorded after
// the effect, an acknowledgement not sent, a message rejected, a panic
// (at Error, with its stack), a payload mismatch.
func (h *Handler) log(d *amqp.Delivery, out Outcome) {
	retried := out.Action == Requeue || out.Action == Republish
	if (out.Err == nil && !out.Mismatch) || (retried && errors.Is(out.Err, idemkit.ErrInProgress) && !out.Mismatch) {
		return
	}
	level := slog.LevelInfo
	if !retried || out.Mismatch {
		level = slog.LevelWarn
	}
	if out.Panicked || out.Exhausted {
		level = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("action", out.Action.String()), slog.Int("attempt", out.Attempt),
		slog.Uint64("tag", d.DeliveryTag), slog.Bool("redelivered", d.Redelivered)}
	if out.Err != nil {
		attrs = append(attrs, slog.Any("err", out.Err))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"panicked", out.Panicked}, {"exhausted", out.Exhausted}, {"mismatch", out.Mismatch}} {
		if f.set {
			attrs = append(attrs, slog.Bool(f.name, true))
		}
	}
	var pe *PanicError
	if errors.As(out.Err, &pe) {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	h.cfg.logger.LogAttrs(context.Background(), level, "idemamqp: delivery", attrs...)
}
