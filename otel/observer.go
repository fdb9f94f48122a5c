package idemotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit"
	idemopts "github.com/idemkit/idemkit/internal/options"
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
	work      metric.Float64Histogram
	evictions metric.Int64Counter
	breaker   metric.Int64Counter
	conflicts metric.Int64Counter
	next      idemkit.Observer
	tracing   bool

	// Outcomes and claims in flight are counted in atomics on the request
	// path and reported by callbacks when the metrics are collected: an
	// outcome costs one atomic add, not a synchronous instrument call.
	counts   [len(modes)][len(kinds)]atomic.Int64
	inFlight [len(modes)]atomic.Int64
	other    sync.Map // attrKey -> *atomic.Int64, for kinds newer than this package

	// attrs holds one prepared attribute set per mode and outcome, so
	// recording allocates nothing for its attributes.
	attrs [len(modes)][len(kinds)]metric.MeasurementOption
	modes [len(modes)]metric.MeasurementOption
}

type attrKey struct {
	mode idemkit.Mode
	kind idemkit.EventKind
}

// kinds are the engine's event kinds, prepared in advance.
var kinds = [...]idemkit.EventKind{
	idemkit.EventAdmitted, idemkit.EventDuplicate, idemkit.EventReplayed, idemkit.EventInProgress,
	idemkit.EventMismatch, idemkit.EventLeaseLost, idemkit.EventReleased, idemkit.EventStoreError,
	idemkit.EventFailOpen, idemkit.EventTokenIssued, idemkit.EventTokenInvalid, idemkit.EventTooLarge,
	idemkit.EventAmbiguous, idemkit.EventForgotten, idemkit.EventCompleted,
}

var modes = [...]idemkit.Mode{idemkit.ModeGuard, idemkit.ModeDo, idemkit.ModeToken}

func (o *Observer) prepare() {
	for mi, m := range modes {
		o.modes[mi] = metric.WithAttributeSet(attribute.NewSet(keyMode.String(string(m))))
		for ki, k := range kinds {
			o.attrs[mi][ki] = measurement(m, k)
		}
	}
}

// modeIndex and kindIndex find a mode's and a kind's place in the arrays
// above, or -1.
func modeIndex(m idemkit.Mode) int {
	switch m {
	case idemkit.ModeGuard:
		return 0
	case idemkit.ModeDo:
		return 1
	case idemkit.ModeToken:
		return 2
	}
	return -1
}

var kindIndexes = func() map[idemkit.EventKind]int {
	m := make(map[idemkit.EventKind]int, len(kinds))
	for i, k := range kinds {
		m[k] = i
	}
	return m
}()

func kindIndex(k idemkit.EventKind) int {
	if i, ok := kindIndexes[k]; ok {
		return i
	}
	return -1
}

func measurement(m idemkit.Mode, k idemkit.EventKind) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(keyMode.String(string(m)), keyOutcome.String(string(k))))
}

// secondsBuckets are the bucket boundaries of the duration histograms,
// from half a millisecond to ten seconds: the values are in seconds, and
// OpenTelemetry's default boundaries (0, 5, 10, ... 10000) suit
// milliseconds, which would put nearly every value in one bucket.
var secondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Option configures NewObserver and WrapStore. Options are applied by
// the rule of every idemkit package: a nil option is refused with its
// position, every invalid option is reported, and the error wraps
// idemkit.ErrInvalid. An option the constructor cannot use (WithNext
// given to WrapStore) is refused, not ignored.
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
			return errors.New("WithMeterProvider(nil)")
		}
		o.mp = mp
		return nil
	}
}

// WithTracerProvider sets where spans go (without it no spans are made).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return errors.New("WithTracerProvider(nil)")
		}
		o.tp = tp
		return nil
	}
}

// WithNext passes every event on to another observer too, such as
// idemkit.SlogObserver, after recording it. It is an option of
// NewObserver only: WrapStore has no events and refuses it.
func WithNext(next idemkit.Observer) Option {
	return func(o *options) error {
		if next == nil {
			return errors.New("WithNext(nil)")
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
	errs := idemopts.Collect(&o, opts)
	if len(errs) == 0 && o.mp == nil && o.tp == nil {
		errs = append(errs, errors.New("give WithMeterProvider, WithTracerProvider or both"))
	}
	if err := idemopts.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemotel: %w", err)
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
	_, errs[0] = m.Int64ObservableCounter("idemkit.outcomes", metric.WithUnit("{outcome}"),
		metric.WithDescription("Engine outcomes by mode and outcome."),
		metric.WithInt64Callback(o.reportOutcomes))
	o.work, errs[1] = m.Float64Histogram("idemkit.work.duration", metric.WithUnit("s"),
		metric.WithDescription("How long admitted work ran."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	_, errs[2] = m.Int64ObservableUpDownCounter("idemkit.claims.in_flight", metric.WithUnit("{claim}"),
		metric.WithDescription("Do and UseToken claims (Begin and BeginBatch ones too) admitted and not ended yet."),
		metric.WithInt64Callback(o.reportInFlight))
	o.evictions, errs[3] = m.Int64Counter("idemkit.evictions", metric.WithUnit("{entry}"),
		metric.WithDescription("Live entries a bounded store pushed out."))
	o.breaker, errs[4] = m.Int64Counter("idemkit.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit breaker state changes of a tiered store."))
	o.conflicts, errs[5] = m.Int64Counter("idemkit.copy_forward.conflicts", metric.WithUnit("{key}"),
		metric.WithDescription("Keys copy-forward found claimed elsewhere after an outage."))
	return errors.Join(errs[:]...)
}

// reportOutcomes reports every outcome counted so far.
func (o *Observer) reportOutcomes(_ context.Context, obs metric.Int64Observer) error {
	for mi := range modes {
		for ki := range kinds {
			if n := o.counts[mi][ki].Load(); n > 0 {
				obs.Observe(n, o.attrs[mi][ki].(metric.ObserveOption))
			}
		}
	}
	o.other.Range(func(k, v any) bool {
		key := k.(attrKey)
		obs.Observe(v.(*atomic.Int64).Load(), measurement(key.mode, key.kind).(metric.ObserveOption))
		return true
	})
	return nil
}

// reportInFlight reports the Do and UseToken claims admitted and not
// ended yet.
func (o *Observer) reportInFlight(_ context.Context, obs metric.Int64Observer) error {
	for mi, m := range modes {
		if m != idemkit.ModeGuard {
			obs.Observe(o.inFlight[mi].Load(), o.modes[mi].(metric.ObserveOption))
		}
	}
	return nil
}

// count adds one outcome, and returns its prepared attributes (nil for a
// mode or kind newer than this package).
func (o *Observer) count(ev idemkit.Event) (int, metric.MeasurementOption) {
	mi, ki := modeIndex(ev.Mode), kindIndex(ev.Kind)
	if mi < 0 || ki < 0 {
		c, _ := o.other.LoadOrStore(attrKey{ev.Mode, ev.Kind}, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		return -1, measurement(ev.Mode, ev.Kind)
	}
	o.counts[mi][ki].Add(1)
	return mi, o.attrs[mi][ki]
}

// Observe records ev: a count by mode and outcome, the work's duration,
// claims in flight, and an event on the call's span.
func (o *Observer) Observe(ctx context.Context, ev idemkit.Event) {
	mi, attrs := o.count(ev)
	if mi >= 0 && ev.Mode != idemkit.ModeGuard {
		// The engine reports exactly one event with a Duration per admitted
		// Do, UseToken, Begin or BeginBatch claim: the one that ends it,
		// however it ends (completed, failed, released, lease lost, store
		// failure, panic). Guard claims have no such event and are not
		// counted.
		switch {
		case ev.Kind == idemkit.EventAdmitted:
			o.inFlight[mi].Add(1)
		case ev.Duration > 0:
			o.inFlight[mi].Add(-1)
			if ev.Kind == idemkit.EventCompleted || ev.Kind == idemkit.EventReleased {
				o.work.Record(ctx, ev.Duration.Seconds(), attrs.(metric.RecordOption))
			}
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

// Start begins the span of one engine call, a child of ctx's span. Without
// a tracer provider it does nothing and allocates nothing.
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
