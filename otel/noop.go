package idemotel

import (
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

var (
	noopMeters  = metricnoop.NewMeterProvider()
	noopTracers = tracenoop.NewTracerProvider()
)
