package idemotel_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The duration histograms are in seconds, with bucket boundaries for
// seconds: OpenTelemetry's default boundaries (0, 5, 10, 25, ... 10000)
// suit milliseconds and would put every store operation in the first
// bucket.
func TestDurationHistogramsHaveBucketsForSeconds(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.engine.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return []byte("v"), nil }); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	seen := map[string]bool{}
	for _, sm := range h.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "idemkit.work.duration" && m.Name != "idemkit.store.duration" {
				continue
			}
			seen[m.Name] = true
			if m.Unit != "s" {
				t.Errorf("%s: unit %q, want s", m.Name, m.Unit)
			}
			hist, ok := m.Data.(metricdata.Histogram[float64])
			if !ok || len(hist.DataPoints) == 0 {
				t.Fatalf("%s: %T with no data points", m.Name, m.Data)
			}
			for _, dp := range hist.DataPoints {
				if !slices.Equal(dp.Bounds, want) {
					t.Errorf("%s: bounds %v, want %v", m.Name, dp.Bounds, want)
				}
			}
		}
	}
	if !seen["idemkit.work.duration"] || !seen["idemkit.store.duration"] {
		t.Fatalf("histograms seen: %v", seen)
	}
}
