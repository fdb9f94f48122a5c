// Package telemetry wires idemkit's OpenTelemetry observer for the
// project's programs: metrics served in Prometheus format, a span per
// engine call, and log lines that carry the call's trace ID.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit"
	idemotel "github.com/idemkit/idemkit/otel"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
)

// meterName is the instrumentation scope of the metrics this package
// defines itself.
const meterName = "github.com/idemkit/idemkit/cmd/internal/telemetry"

// Telemetry is a program's OpenTelemetry wiring: idemkit's metrics for
// GET /metrics in Prometheus format, and spans for every engine call (kept
// in process: nothing is exported, but log lines carry their trace IDs).
type Telemetry struct {
	// Observer is the engine's observer (idemkit.WithObserver).
	Observer *idemotel.Observer
	// Completer records the completer's metrics (completer.WithOutcomes
	// and completer.WithPasses).
	Completer *idemotel.Completer
	// Metrics serves the metrics in Prometheus format.
	Metrics http.Handler
	meters  *sdkmetric.MeterProvider
	tracers *sdktrace.TracerProvider
	// refusals counts the writes a bounded memory store refused for want
	// of room it could make without evicting a claim in progress.
	refusals metric.Int64Counter
	// relayed counts the outbox messages the relay handled, by outcome;
	// relayLag is the age of the oldest row of its last batch.
	relayed  metric.Int64Counter
	relayLag metric.Float64Gauge

	mu      sync.Mutex
	breaker string // the tiered store's breaker state, as OnTierEvent last saw it
}

// New builds the providers and the observer; next (the logger's observer)
// still gets every event.
func New(next idemkit.Observer) (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t := &Telemetry{
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		meters:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)),
		tracers: sdktrace.NewTracerProvider(),
		breaker: string(tiered.EventClosed),
	}
	t.refusals, err = t.meters.Meter(meterName).Int64Counter("idemkit.store.refusals", metric.WithUnit("{write}"),
		metric.WithDescription("Writes a bounded memory store refused because only claims in progress could have made room"))
	if err != nil {
		return nil, err
	}
	t.Observer, err = idemotel.NewObserver(idemotel.WithMeterProvider(t.meters),
		idemotel.WithTracerProvider(t.tracers), idemotel.WithNext(next))
	if err != nil {
		return nil, err
	}
	if t.Completer, err = idemotel.NewCompleter(idemotel.WithMeterProvider(t.meters)); err != nil {
		return nil, err
	}
	m := t.meters.Meter(meterName)
	if t.relayed, err = m.Int64Counter("idemkit.relay.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Outbox messages the relay handled, by outcome: published, duplicate (the broker had it) or failed (left for a later attempt)")); err != nil {
		return nil, err
	}
	if t.relayLag, err = m.Float64Gauge("idemkit.relay.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest outbox row of the relay's last batch (0 when it was empty)")); err != nil {
		return nil, err
	}
	return t, nil
}

// Relayed records a batch of the outbox relay: the messages published
// (duplicates among them counted apart), those that failed, and the
// batch's lag.
func (t *Telemetry) Relayed(published, duplicates, failed int, lag time.Duration) {
	ctx := context.Background()
	for _, c := range []struct {
		outcome string
		n       int
	}{{"published", published - duplicates}, {"duplicate", duplicates}, {"failed", failed}} {
		if c.n > 0 {
			t.relayed.Add(ctx, int64(c.n), metric.WithAttributes(attribute.String("outcome", c.outcome)))
		}
	}
	t.relayLag.Record(ctx, lag.Seconds())
}

// WithMetrics serves the metrics on GET /metrics beside app.
func (t *Telemetry) WithMetrics(app http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.Metrics)
	mux.Handle("/", app)
	return mux
}

// WrapStore returns s with every operation measured
// (idemkit_store_duration_seconds, by operation) and traced: see
// idemotel.WrapStore.
func (t *Telemetry) WrapStore(s store.Store) (store.Store, error) {
	return idemotel.WrapStore(s, idemotel.WithMeterProvider(t.meters), idemotel.WithTracerProvider(t.tracers))
}

// Evicted counts a live entry a bounded memory store pushed out: pass it
// to memstore.WithOnEvict. The key is not used.
func (t *Telemetry) Evicted(string) { t.Observer.Evicted(context.Background()) }

// Refused counts a write a bounded memory store refused with
// memstore.ErrFull: pass it to memstore.WithOnFull. The key is not used.
func (t *Telemetry) Refused(string) { t.refusals.Add(context.Background(), 1) }

// OnTierEvent counts the breaker changes of a tiered store, with the state
// it left and the one it entered, and its copy-forward conflicts: pass it
// to tiered.WithObserver (setup.Config.OnTierEvent). Other events are
// not counted; the key is not used.
func (t *Telemetry) OnTierEvent(ev tiered.Event) {
	ctx := context.Background()
	switch ev.Kind {
	case tiered.EventOpen, tiered.EventHalfOpen, tiered.EventClosed:
		t.mu.Lock()
		from := t.breaker
		t.breaker = string(ev.Kind)
		t.mu.Unlock()
		t.Observer.BreakerChanged(ctx, from, string(ev.Kind))
	case tiered.EventConflict:
		t.Observer.CopyForwardConflict(ctx)
	}
}

// RegisterSpanProcessor sends the spans to sp too (an exporter, or a
// recorder in a test).
func (t *Telemetry) RegisterSpanProcessor(sp sdktrace.SpanProcessor) {
	t.tracers.RegisterSpanProcessor(sp)
}

// TraceLog is a slog.Handler that adds the trace and span IDs of the
// record's context, so a log line leads to its trace.
type TraceLog struct{ slog.Handler }

// Handle adds trace_id and span_id when ctx carries a span.
func (h TraceLog) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler.
func (h TraceLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return TraceLog{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper around the derived handler.
func (h TraceLog) WithGroup(name string) slog.Handler { return TraceLog{h.Handler.WithGroup(name)} }
