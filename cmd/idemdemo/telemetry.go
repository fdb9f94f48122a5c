package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit"
	idemotel "github.com/idemkit/idemkit/otel"
)

// telemetry is the demo's OpenTelemetry wiring: idemkit's metrics served in
// Prometheus format on /metrics, spans for every engine call (kept in
// process: the demo exports none, but logs their trace IDs).
type telemetry struct {
	observer *idemotel.Observer
	metrics  http.Handler
	meters   *sdkmetric.MeterProvider
	tracers  *sdktrace.TracerProvider
}

// newTelemetry builds the providers and the observer; next (the logger's
// observer) still gets every event.
func newTelemetry(next idemkit.Observer) (*telemetry, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t := &telemetry{
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		meters:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)),
		tracers: sdktrace.NewTracerProvider(),
	}
	t.observer, err = idemotel.NewObserver(idemotel.WithMeterProvider(t.meters),
		idemotel.WithTracerProvider(t.tracers), idemotel.WithNext(next))
	if err != nil {
		return nil, err
	}
	return t, nil
}

// withMetrics serves the metrics on GET /metrics beside app.
func (t *telemetry) withMetrics(app http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.metrics)
	mux.Handle("/", app)
	return mux
}

// traceLog is a slog.Handler that adds the trace and span IDs of the
// record's context, so a log line leads to its trace.
type traceLog struct{ slog.Handler }

// Handle adds trace_id and span_id when ctx carries a span.
func (h traceLog) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler.
func (h traceLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceLog{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper around the derived handler.
func (h traceLog) WithGroup(name string) slog.Handler { return traceLog{h.Handler.WithGroup(name)} }
