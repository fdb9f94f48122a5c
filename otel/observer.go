package idemotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit"
)

// scope is the instrumentation scope name of every meter and tracer here.
const scope = "github.com/idemkit/idemkit/otel"

// Attribute keys.
const (
	keyMode      = attribute.Key("idemkit.mode")
	keyOutcome   = attribute.Key("idemkit.outcome")
	keyOperation = attribute.Key("idemkit.store.operation")
	keyState     = attribute.Key("idemkit.breaker.state")
	keyErrorType = attribute.Key("error.type")
)

// Observer is an idemkit.Observer and idemkit.Tracer that records
// OpenTelemetry metrics and spans. Build it with NewObserver and pass it
// with idemkit.WithObserver; WithNext keeps a logger (or any observer) in
// the chain.
type Observer struct {
	tracer    trace.Tracer
	outcomes  metric.Int64Counter
	work      metric.Float64Histogram
	inFlight  metric.Int64UpDownCounter
	evictions metric.Int64Counter
	breaker   metric.Int64Counter
	conflicts metric.Int64Counter
	next      idemkit.Observer
	tracing   bool

	// attrs holds one prepared measurement option per mode and outcome,
	// so recording an outcome allocates nothing for its attributes.
	attrs map[attrKey]metric.MeasurementOption
	modes map[idemkit.Mode]metric.MeasurementOption
}

type attrKey struct {
	mode idemkit.Mode
	kind idemkit.EventKind
}

// kinds are the engine's event kinds, prepared in advance.
var kinds = []idemkit.EventKind{
	idemkit.EventAdmitted, idemkit.EventDuplicate, idemkit.EventReplayed, idemkit.EventInProgress,
	idemkit.EventMismatch, idemkit.EventLeaseLost, idemkit.EventReleased, idemkit.EventStoreError,
	idemkit.EventFailOpen, idemkit.EventTokenIssued, idemkit.EventTokenInvalid, idemkit.EventTooLarge,
	idemkit.EventAmbiguous, idemkit.EventForgotten, idemkit.EventCompleted,
}

var modes = []idemkit.Mode{idemkit.ModeGuard, idemkit.ModeDo, idemkit.ModeToken}

func (o *Observer) prepare() {
	o.attrs = map[attrKey]metric.MeasurementOption{}
	o.modes = map[idemkit.Mode]metric.MeasurementOption{}
	for _, m := range modes {
		o.modes[m] = metric.WithAttributeSet(attribute.NewSet(keyMode.String(string(m))))
		for _, k := range kinds {
			o.attrs[attrKey{m, k}] = measurement(m, k)
		}
	}
}

func measurement(m idemkit.Mode, k idemkit.EventKind) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(keyMode.String(string(m)), keyOutcome.String(string(k))))
}

// Option configures NewObserver.
type Option func(*options) error

type options struct {
	mp   metric.MeterProvider
	tp   trace.TracerProvider
	next idemkit.Observer
}

// WithMeterProvider sets where metrics go (required unless
// WithTracerProvider is given; without it no metrics are recorded).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		if mp == nil {
			return errors.New("nil MeterProvider")
		}
		o.mp = mp
		return nil
	}
}

// WithTracerProvider sets where spans go (without it no spans are made).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return errors.New("nil TracerProvider")
		}
		o.tp = tp
		return nil
	}
}

// WithNext passes every event on to another observer too, such as
// idemkit.SlogObserver, after recording it.
func WithNext(next idemkit.Observer) Option {
	return func(o *options) error {
		if next == nil {
			return errors.New("nil next observer")
		}
		o.next = next
		return nil
	}
}

// NewObserver returns an Observer recording to the providers given. At
// least one of WithMeterProvider and WithTracerProvider is required. Errors
// wrap idemkit.ErrInvalid.
func NewObserver(opts ...Option) (*Observer, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("idemotel: %w: %w", idemkit.ErrInvalid, err)
		}
	}
	if o.mp == nil && o.tp == nil {
		return nil, fmt.Errorf("idemotel: %w: give WithMeterProvider, WithTracerProvider or both", idemkit.ErrInvalid)
	}
	mp, tp := o.mp, o.tp
	if mp == nil {
		mp = noopMeters
	}
	if tp == nil {
		tp = noopTracers
	}
	obs := &Observer{tracer: tp.Tracer(scope), next: o.next, tracing: o.tp != nil}
	obs.prepare()
	if err := obs.instruments(mp.Meter(scope)); err != nil {
		return nil, fmt.Errorf("idemotel: instruments: %w", err)
	}
	return obs, nil
}

func (o *Observer) instruments(m metric.Meter) error {
	var errs [6]error
	o.outcomes, errs[0] = m.Int64Counter("idemkit.outcomes", metric.WithUnit("{outcome}"),
		metric.WithDescription("Engine outcomes by mode and outcome."))
	o.work, errs[1] = m.Float64Histogram("idemkit.work.duration", metric.WithUnit("s"),
		metric.WithDescription("How long admitted work ran."))
	o.inFlight, errs[2] = m.Int64UpDownCounter("idemkit.claims.in_flight", metric.WithUnit("{claim}"),
		metric.WithDescription("Do and token executions running now."))
	o.evictions, errs[3] = m.Int64Counter("idemkit.evictions", metric.WithUnit("{entry}"),
		metric.WithDescription("Live entries a bounded store pushed out."))
	o.breaker, errs[4] = m.Int64Counter("idemkit.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes of a tiered store."))
	o.conflicts, errs[5] = m.Int64Counter("idemkit.copy_forward.conflicts", metric.WithUnit("{key}"),
		metric.WithDescription("Keys copy-forward found claimed elsewhere after an outage."))
	return errors.Join(errs[:]...)
}

// Observe records ev: a count by mode and outcome, the work's duration,
// claims in flight, and an event on the call's span.
func (o *Observer) Observe(ctx context.Context, ev idemkit.Event) {
	attrs, ok := o.attrs[attrKey{ev.Mode, ev.Kind}]
	if !ok { // an event kind newer than this package
		attrs = measurement(ev.Mode, ev.Kind)
	}
	o.outcomes.Add(ctx, 1, attrs)
	switch ev.Kind {
	case idemkit.EventAdmitted:
		if ev.Mode != idemkit.ModeGuard {
			o.inFlight.Add(ctx, 1, o.modes[ev.Mode])
		}
	case idemkit.EventCompleted, idemkit.EventReleased, idemkit.EventLeaseLost:
		if ev.Mode != idemkit.ModeGuard && ev.Duration > 0 {
			o.inFlight.Add(ctx, -1, o.modes[ev.Mode])
			o.work.Record(ctx, ev.Duration.Seconds(), attrs)
		}
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(string(ev.Kind))
		span.SetAttributes(keyOutcome.String(string(ev.Kind)))
	}
	if o.next != nil {
		o.next.Observe(ctx, ev)
	}
}

// Start begins the span of one engine call, a child of ctx's span.
func (o *Observer) Start(ctx context.Context, mode idemkit.Mode, op string) (context.Context, func(error)) {
	if !o.tracing {
		return ctx, noEnd
	}
	ctx, span := o.tracer.Start(ctx, "idemkit."+op, trace.WithAttributes(keyMode.String(string(mode))))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, errorType(err))
			span.SetAttributes(keyErrorType.String(errorType(err)))
		}
		span.End()
	}
}

func noEnd(error) {}

// Evicted counts a live entry a bounded store pushed out; pass it to
// memstore's eviction callback.
func (o *Observer) Evicted(ctx context.Context) { o.evictions.Add(ctx, 1) }

// BreakerChanged counts a circuit breaker state change of a tiered store;
// from and to are the breaker's state names.
func (o *Observer) BreakerChanged(ctx context.Context, from, to string) {
	o.breaker.Add(ctx, 1, metric.WithAttributes(keyState.String(to), attribute.String("idemkit.breaker.from", from)))
}

// CopyForwardConflict counts a key that copy-forward found claimed
// elsewhere after an outage.
func (o *Observer) CopyForwardConflict(ctx context.Context) { o.conflicts.Add(ctx, 1) }

// errorType names an error by the idemkit sentinel it wraps, a bounded
// value that never holds a key or a message.
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{idemkit.ErrDuplicate, "duplicate"},
		{idemkit.ErrInProgress, "in_progress"},
		{idemkit.ErrMismatch, "mismatch"},
		{idemkit.ErrLeaseLost, "lease_lost"},
		{idemkit.ErrTokenInvalid, "token_invalid"},
		{idemkit.ErrResultTooLarge, "too_large"},
		{idemkit.ErrUnavailable, "unavailable"},
		{idemkit.ErrInvalid, "invalid"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "other"
}

var (
	_ idemkit.Observer = (*Observer)(nil)
	_ idemkit.Tracer   = (*Observer)(nil)
)
