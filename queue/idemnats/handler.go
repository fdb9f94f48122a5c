package idemnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/queue/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
)

// Func processes one message and returns the result to record for its
// key. An error asks for redelivery unless it is final (WithErrorCodec,
// WithFinal).
type Func func(ctx context.Context, msg jetstream.Msg) ([]byte, error)

// Handler runs a Func at most once per message key and acknowledges each
// delivery accordingly. It is safe for concurrent use; build one per
// consumer at start-up.
type Handler struct {
	p      *delivery.Processor
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
		errs = append(errs, fmt.Errorf("idemnats: %w: nil handler function", idemkit.ErrInvalid))
	}
	for _, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("idemnats: %w: nil option", idemkit.ErrInvalid))
			continue
		}
		errs = append(errs, o(&cfg))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	dcfg := delivery.Config{Codec: cfg.codec, Final: cfg.final, RetryDelay: cfg.retryDelay}
	p, err := delivery.New(e, "nats", name, dcfg, cfg.engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemnats: %w", err)
	}
	return &Handler{p: p, fn: fn, cfg: cfg, logger: cfg.logger}, nil
}

// Action is how a delivery was acknowledged.
type Action int

const (
	// Ack: processed now, or earlier (a replay).
	Ack Action = iota
	// Nak: redelivery requested after Outcome.Delay.
	Nak
	// Term: never to be redelivered.
	Term
)

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
	return h.settle(msg, v)
}

// request describes msg for the delivery rules.
func (h *Handler) request(msg jetstream.Msg) delivery.Request {
	r := delivery.Request{Run: func(ctx context.Context) ([]byte, error) { return h.fn(ctx, msg) }}
	r.Key, r.KeyErr = h.cfg.key(msg)
	if r.KeyErr == nil && h.cfg.fingerprint != nil {
		var err error
		if r.Fingerprint, err = h.cfg.fingerprint(msg); err != nil {
			r.KeyErr = fmt.Errorf("fingerprint: %w", err)
		}
	}
	return r
}

// settle sends the acknowledgement a verdict calls for.
func (h *Handler) settle(msg jetstream.Msg, v delivery.Verdict) Outcome {
	out := Outcome{Ran: v.Ran, Replayed: v.Replayed, Err: v.Err}
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
	return out
}

// log reports outcomes an operator must see: a result not recorded after
// the effect, an acknowledgement not sent, a message terminated.
func (h *Handler) log(msg jetstream.Msg, out Outcome) {
	if out.Err == nil || (out.Action == Nak && errors.Is(out.Err, idemkit.ErrInProgress)) {
		return
	}
	level := slog.LevelInfo
	if out.Action != Nak {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("action", out.Action.String()), slog.Any("err", out.Err)}
	if md, err := msg.Metadata(); err == nil {
		attrs = append(attrs, slog.String("stream", md.Stream), slog.Uint64("seq", md.Sequence.Stream),
			slog.Uint64("delivered", md.NumDelivered))
	}
	h.logger.LogAttrs(context.Background(), level, "idemnats: delivery", attrs...)
}
