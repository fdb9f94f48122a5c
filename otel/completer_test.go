package idemotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/testkit"
	idemotel "github.com/idemkit/idemkit/otel"
)

// completerMetrics returns the completer's metrics read from r: each
// counter's and gauge's data points by their attribute value.
func completerMetrics(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasPrefix(m.Name, "idemkit.completer.") {
				continue
			}
			points := map[string]int64{}
			var dps []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				dps = d.DataPoints
			case metricdata.Gauge[int64]:
				dps = d.DataPoints
			}
			for _, dp := range dps {
				label := ""
				for _, kv := range dp.Attributes.ToSlice() {
					label = kv.Value.String()
				}
				points[label] += dp.Value
			}
			got[m.Name] = points
		}
	}
	return got
}

// A pass of the completer that resumes one operation, fails one and
// reports one is counted by outcome; the gauge holds the last pass's
// abandoned operations, and a failed listing counts a failed pass.
func TestCompleterMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		m, err := idemotel.NewCompleter(idemotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
		if err != nil {
			t.Fatal(err)
		}
		s := testkit.NewMem(t)
		e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Second), idemkit.WithoutHeartbeat())
		for _, c := range []struct {
			key  string
			opts []idemkit.Option
		}{{"ok", []idemkit.Option{idemkit.WithInput("ok", nil)}}, {"bad", []idemkit.Option{idemkit.WithInput("bad", nil)}}, {"none", nil}} {
			if _, _, err := e.Begin(t.Context(), c.key, "", c.opts...); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute)
		funcs := idemkit.Funcs{
			"ok":  func(context.Context, []byte) ([]byte, error) { return []byte("done"), nil },
			"bad": func(context.Context, []byte) ([]byte, error) { return nil, errors.New("card declined") },
		}
		r, err := completer.Resume(t.Context(), e, s, funcs, completer.WithOutcomes(m.Outcome))
		m.Pass(r, err)
		m.Pass(completer.Resumed{}, errors.New("store down"))
		got := completerMetrics(t, reader)
		ops := got["idemkit.completer.operations"]
		if ops["resumed"] != 1 || ops["failed"] != 1 || ops["reported"] != 1 || len(ops) != 3 {
			t.Errorf("operations by outcome: %v", ops)
		}
		if g := got["idemkit.completer.abandoned"]; g[""] != 3 {
			t.Errorf("abandoned gauge: %v, want 3", g)
		}
		if p := got["idemkit.completer.passes"]; p[""] != 1 || p["listing"] != 1 {
			t.Errorf("passes: %v, want one and one failed", p)
		}
	})
}

// NewCompleter requires a meter provider and refuses what it cannot use.
func TestNewCompleterOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []idemotel.Option
		want string
	}{
		{"none", nil, "WithMeterProvider is required"},
		{"tracer", []idemotel.Option{idemotel.WithMeterProvider(sdkmetric.NewMeterProvider()), idemotel.WithTracerProvider(noop.NewTracerProvider())}, "WithTracerProvider: "},
		{"next", []idemotel.Option{idemotel.WithMeterProvider(sdkmetric.NewMeterProvider()), idemotel.WithNext(idemkit.SlogObserver(nil))}, "WithNext: "},
		{"nil", []idemotel.Option{nil}, "option 1 is nil"},
	} {
		_, err := idemotel.NewCompleter(c.opts...)
		if !errors.Is(err, idemkit.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
}
