package idemnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/queue/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
)

// Func processes one message and returns the result to record for its
// key. An error asks for redelivery unless it is final (WithErrorCodec,
// WithFinal); so does a panic, which the Handler recovers.
type Func func(ctx context.Context, msg jetstream.Msg) ([]byte, error)

// Handler runs a Func at most once per message key and acknowledges each
// delivery accordingly. It is safe for concurrent use; build one per
// consumer at start-up.
type Handler struct {
	p      *delivery.Processor
	name   string
	fn     Func
	cfg    config
	logger *slog.Logger
}

// NewHandler returns a Handler that runs fn once per message key, guarded
// by e. name is the Handler's own key space (1 to 64 bytes of printable
// ASCII, stable across deploys): two consumers of one stream, with
// different names, process each message once each. It returns an error
// wrapping idemkit.ErrInvalid for a nil engine or fn, a bad name or an
// invalid option.
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
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemnats: %w", err)
	}
	dcfg := delivery.Config{Codec: cfg.codec, Final: cfg.final, Backoff: cfg.backoff, RefuseMismatch: cfg.fingerprint != nil}
	p, err := delivery.New(e, "nats", name, dcfg, cfg.engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemnats: %w", err)
	}
	return &Handler{p: p, name: name, fn: fn, cfg: cfg, logger: cfg.logger}, nil
}

// Action is how a delivery was acknowledged.
type Action int

const (
	// Ack: processed now, or earlier (a replay).
	Ack Action = iota
	// Nak: redelivery requested after Outcome.Delay.
	Nak
	// Term: never to be redelivered (after a dead-letter copy was stored,
	// when Outcome.DeadLettered).
	Term
)

// ErrPanic is wrapped by the Outcome.Err of a delivery whose handler
// panicked; the error is a *PanicError.
var ErrPanic = delivery.ErrPanic

// PanicError is a recovered panic of the handler: its value and stack.
type PanicError = delivery.PanicError

// String returns "ack", "nak" or "term".
func (a Action) String() string {
	if a < Ack || a > Term {
		return fmt.Sprintf("Action(%d)", int(a))
	}
	return [...]string{"ack", "nak", "term"}[a]
}

// Outcome is what the Handler did with one delivery.
type Outcome struct {
	// Action is the acknowledgement sent.
	Action Action
	// Delay is the NakWithDelay delay (Nak only).
	Delay time.Duration
	// Ran reports that fn ran for this delivery.
	Ran bool
	// Replayed reports that a recorded outcome answered: fn did not run.
	Replayed bool
	// Attempt is the delivery's number (the server's NumDelivered).
	Attempt int
	// Panicked reports that fn panicked; Err wraps ErrPanic.
	Panicked bool
	// Exhausted reports that fn failed on the last delivery allowed
	// (WithMaxAttempts): the message was dead-lettered or terminated.
	Exhausted bool
	// DeadLettered reports that a copy was stored on the dead-letter
	// subject (WithDeadLetter).
	DeadLettered bool
	// Mismatch reports that the key was first seen with another payload
	// (see WithFingerprint).
	Mismatch bool
	// Err is why the message was not acked, or a failure to record the
	// result or to send the acknowledgement.
	Err error
}

// Handle processes msg; it is a jetstream.MessageHandler, for
// Consumer.Consume and PushConsumer.Consume. Use HandleContext to pass a
// context or look at the outcome.
func (h *Handler) Handle(msg jetstream.Msg) {
	h.HandleContext(context.Background(), msg)
}

// HandleContext processes msg: it claims the message's key, runs fn when
// admitted, records the result and acknowledges the delivery (see the
// package doc for each case).
func (h *Handler) HandleContext(ctx context.Context, msg jetstream.Msg) Outcome {
	prog := startProgress(h.cfg.progress, msg)
	defer prog.end()
	v := h.p.One(ctx, h.request(msg))
	prog.settle(0)
	return h.settle(ctx, msg, v)
}

// request describes msg for the delivery rules. A panicking key or
// fingerprint function is a key error: the message is terminated.
func (h *Handler) request(msg jetstream.Msg) (r delivery.Request) {
	r.Run = func(ctx context.Context) ([]byte, error) { return h.fn(ctx, msg) }
	r.Attempt = 1
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		r.Attempt = int(min(md.NumDelivered, 1<<31))
	}
	defer func() {
		if x := recover(); x != nil {
			r.Key, r.KeyErr = "", fmt.Errorf("key or fingerprint function panicked: %v", x)
		}
	}()
	r.Key, r.KeyErr = h.cfg.key(msg)
	switch {
	case r.KeyErr != nil:
	case h.cfg.fingerprint != nil:
		var err error
		if r.Fingerprint, err = h.cfg.fingerprint(msg); err != nil {
			r.KeyErr = fmt.Errorf("fingerprint: %w", err)
		}
	default:
		r.Fingerprint = delivery.Digest(msg.Data())
	}
	return r
}

// settle sends the acknowledgement a verdict calls for.
func (h *Handler) settle(ctx context.Context, msg jetstream.Msg, v delivery.Verdict) Outcome {
	out := Outcome{Ran: v.Ran, Replayed: v.Replayed, Panicked: v.Panicked, Exhausted: v.Exhausted, Mismatch: v.Mismatch, Err: v.Err, Attempt: 1}
	if md, err := msg.Metadata(); err == nil {
		out.Attempt = int(min(max(md.NumDelivered, 1), 1<<31))
	}
	if v.Exhausted && h.cfg.deadLetter != nil {
		if err := h.cfg.deadLetter.publish(ctx, h.name, msg, out); err != nil {
			// never terminated without its copy: try again on the next delivery
			v = delivery.Verdict{Action: delivery.Retry, Delay: h.cfg.backoff.Max}
			out.Exhausted, out.Err = false, errors.Join(out.Err, err)
		} else {
			out.DeadLettered = true
		}
	}
	var err error
	switch v.Action {
	case delivery.Ack:
		out.Action = Ack
		err = msg.Ack()
	case delivery.Retry:
		out.Action, out.Delay = Nak, v.Delay
		if v.Delay > 0 {
			err = msg.NakWithDelay(v.Delay)
		} else {
			err = msg.Nak()
		}
	case delivery.Drop:
		out.Action = Term
		err = msg.Term() // TermWithReason is ignored by servers before 2.10.4
	}
	if err != nil {
		out.Err = errors.Join(out.Err, fmt.Errorf("idemnats: %s: %w", out.Action, err))
	}
	h.log(msg, out)
	if h.cfg.report != nil {
		h.cfg.report(ctx, msg, out)
	}
	return out
}

// log reports outcomes an operator must see: a result not recorded after
// the effect, an acknowledgement not sent, a message terminated, a panic
// (at Error, with its stack), a payload mismatch.
func (h *Handler) log(msg jetstream.Msg, out Outcome) {
	if (out.Err == nil && !out.Mismatch) || (out.Action == Nak && errors.Is(out.Err, idemkit.ErrInProgress) && !out.Mismatch) {
		return
	}
	level := slog.LevelInfo
	if out.Action != Nak || out.Mismatch {
		level = slog.LevelWarn
	}
	if out.Panicked || out.Exhausted {
		level = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("action", out.Action.String()), slog.Int("attempt", out.Attempt)}
	if out.Err != nil {
		attrs = append(attrs, slog.Any("err", out.Err))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"panicked", out.Panicked}, {"exhausted", out.Exhausted}, {"dead_lettered", out.DeadLettered}, {"mismatch", out.Mismatch}} {
		if f.set {
			attrs = append(attrs, slog.Bool(f.name, true))
		}
	}
	var pe *PanicError
	if errors.As(out.Err, &pe) {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	if md, err := msg.Metadata(); err == nil {
		attrs = append(attrs, slog.String("stream", md.Stream), slog.Uint64("seq", md.Sequence.Stream),
			slog.Uint64("delivered", md.NumDelivered))
	}
	h.logger.LogAttrs(context.Background(), level, "idemnats: delivery", attrs...)
}
