package idemotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	idemotel "github.com/idemkit/idemkit/otel"
)

type harness struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *idemotel.Observer
	engine *idemkit.Engine
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	obs, err := idemotel.NewObserver(idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	mem := testkit.NewMem(t)
	st, err := idemotel.WrapStore(mem, idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	h.engine, err = idemkit.New(st, idemkit.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// outcomes returns the idemkit.outcomes counter as "mode/outcome" -> value.
func outcomes(rm metricdata.ResourceMetrics) map[string]int64 {
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "idemkit.outcomes" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				mode, _ := dp.Attributes.Value("idemkit.mode")
				oc, _ := dp.Attributes.Value("idemkit.outcome")
				out[mode.AsString()+"/"+oc.AsString()] += dp.Value
			}
		}
	}
	return out
}

// A storm of concurrent duplicates with known outcomes: the counters must
// equal them exactly.
func TestCountersEqualAStormsOutcomes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const keys, copies = 10, 20
	release := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for k := range keys {
		for range copies {
			wg.Go(func() {
				res, err := h.engine.Do(ctx, fmt.Sprint("order-", k), "fp", func(context.Context) ([]byte, error) {
					<-release
					return []byte("ok"), nil
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, idemkit.ErrInProgress):
					got["in_progress"]++
				case err != nil:
					t.Errorf("unexpected %v", err)
				case res.Replayed:
					got["replayed"]++
				default:
					got["admitted"]++
				}
			})
		}
	}
	testkit.WaitFor(t, "every copy but the first to find its key in progress", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["in_progress"] == keys*(copies-1)
	})
	close(release)
	wg.Wait()
	for k := range keys { // one replay per key after the storm
		res, err := h.engine.Do(ctx, fmt.Sprint("order-", k), "fp", nil)
		if err != nil || !res.Replayed {
			t.Fatalf("replay: %v %v", res, err)
		}
	}
	want := map[string]int64{
		"do/admitted":    keys,
		"do/in_progress": keys * (copies - 1),
		"do/completed":   keys,
		"do/replayed":    keys,
	}
	c := outcomes(h.collect(t))
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, c[k], v, c)
		}
	}
	if len(c) != len(want) {
		t.Errorf("unexpected outcomes: %v", c)
	}
	if got["admitted"] != keys || got["in_progress"] != keys*(copies-1) {
		t.Errorf("callers saw %v", got)
	}
}

func TestSpansNestAndShowReplays(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for range 2 {
		if _, err := h.engine.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) { return []byte("v"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	var do []sdktrace.ReadOnlySpan
	var storeSpans int
	for _, s := range h.spans.Ended() {
		switch {
		case s.Name() == "idemkit.Do":
			do = append(do, s)
		case strings.HasPrefix(s.Name(), "idemkit.store."):
			storeSpans++
			if !s.Parent().IsValid() {
				t.Errorf("store span %s has no parent", s.Name())
			}
		}
	}
	if len(do) != 2 || storeSpans < 3 {
		t.Fatalf("spans: %d Do, %d store", len(do), storeSpans)
	}
	last := func(s sdktrace.ReadOnlySpan) string {
		for _, a := range s.Attributes() {
			if a.Key == "idemkit.outcome" {
				return a.Value.AsString()
			}
		}
		return ""
	}
	if last(do[0]) != "completed" || last(do[1]) != "replayed" {
		t.Errorf("outcomes on spans: %q, %q", last(do[0]), last(do[1]))
	}
}

// No attribute value, on any metric or span, equals or contains a key,
// token, principal or fingerprint.
func TestAttributesHoldNoSecrets(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const key, principal, fp = "KEY-5ecret", "PRINCIPAL-5ecret", "FP-5ecret"
	scope := idemkit.WithScope(principal)
	_, _ = h.engine.Do(ctx, key, fp, func(context.Context) ([]byte, error) { return []byte("v"), nil }, scope)
	_, _ = h.engine.Do(ctx, key, "other", nil, scope)
	_ = h.engine.Guard(ctx, key, func(context.Context) error { return nil }, scope)
	_ = h.engine.Guard(ctx, key, func(context.Context) error { return nil }, scope)
	tok, err := h.engine.IssueToken(ctx, principal)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = h.engine.UseToken(ctx, principal, tok.Value, func(context.Context) ([]byte, error) { return nil, errors.New("fail") })
	_, _ = h.engine.UseToken(ctx, principal, tok.Value, nil)
	_, _ = h.engine.UseToken(ctx, "someone-else", tok.Value, nil)
	secrets := []string{key, principal, fp, tok.Value}
	check := func(where, v string) {
		for _, s := range secrets {
			if strings.Contains(v, s) {
				t.Errorf("%s holds a secret: %q", where, v)
			}
		}
	}
	values := 0
	for _, sm := range h.collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					for _, kv := range dp.Attributes.ToSlice() {
						values++
						check(m.Name, kv.Value.String())
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					for _, kv := range dp.Attributes.ToSlice() {
						values++
						check(m.Name, kv.Value.String())
					}
				}
			}
		}
	}
	for _, s := range h.spans.Ended() {
		check("span name", s.Name())
		for _, kv := range s.Attributes() {
			values++
			check(s.Name(), kv.Value.String())
		}
		for _, ev := range s.Events() {
			check(s.Name()+" event", ev.Name)
		}
	}
	if values < 20 {
		t.Fatalf("only %d attribute values seen; the check saw nothing", values)
	}
}

func TestNewObserverRefusesBadOptions(t *testing.T) {
	for name, opts := range map[string][]idemotel.Option{
		"nothing":      nil,
		"nil meter":    {idemotel.WithMeterProvider(nil)},
		"nil tracer":   {idemotel.WithTracerProvider(nil)},
		"nil observer": {idemotel.WithTracerProvider(sdktrace.NewTracerProvider()), idemotel.WithNext(nil)},
	} {
		if _, err := idemotel.NewObserver(opts...); !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := idemotel.WrapStore(nil); !errors.Is(err, idemkit.ErrInvalid) {
		t.Errorf("WrapStore(nil): %v", err)
	}
}
