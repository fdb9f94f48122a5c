package idemotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemkit/idemkit/internal/storewrap/captest"
	"github.com/idemkit/idemkit/internal/testkit"
	idemotel "github.com/idemkit/idemkit/otel"
	"github.com/idemkit/idemkit/store"
)

// valuer is a store that offers SetNXValue (as Redis does) and no batches.
type valuer struct{ store.Store }

func (v valuer) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	set, e, err := v.SetNX(ctx, key, value, ttl)
	return set, e.Value, err
}

// pinger is a store with a Ping that fails.
type pinger struct{ store.Store }

func (pinger) Ping(context.Context) error { return errDown }

// The wrapper offers Ping, SetNXValue and SetNXBatch exactly when the
// wrapped store does, so wrapping a store for metrics does not change what the
// engine does with it (one command per claim on Redis, one call per batch),
// and it measures those operations too.
func TestWrapStoreKeepsTheStoresCapabilities(t *testing.T) {
	mem := testkit.NewMem(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()

	batching, err := idemotel.WrapStore(mem, idemotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := batching.(store.SetNXValuer); ok {
		t.Error("the wrapper of a memstore offers SetNXValue; memstore does not")
	}
	b, ok := batching.(store.Batcher)
	if !ok {
		t.Fatal("the wrapper of a memstore hides its SetNXBatch")
	}
	if _, err := b.SetNXBatch(ctx, []store.BatchItem{{Key: "b", Value: []byte("v"), TTL: time.Minute}}); err != nil {
		t.Fatal(err)
	}

	valuing, err := idemotel.WrapStore(valuer{mem}, idemotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := valuing.(store.Batcher); ok {
		t.Error("the wrapper offers SetNXBatch; the wrapped store does not")
	}
	v, ok := valuing.(store.SetNXValuer)
	if !ok {
		t.Fatal("the wrapper hides SetNXValue")
	}
	if set, existing, err := v.SetNXValue(ctx, "b", []byte("w"), time.Minute); err != nil || set || string(existing) != "v" {
		t.Fatalf("SetNXValue: %v %q %v", set, existing, err)
	}
	// Close too follows the wrapped store: memstore has it, valuer (which
	// hides it) does not.
	if _, ok := batching.(store.Closer); !ok {
		t.Error("the wrapper of a memstore hides its Close")
	}
	if _, ok := valuing.(store.Closer); ok {
		t.Error("the wrapper offers Close; the wrapped store does not")
	}
	for _, c := range []store.Store{batching, valuing} {
		// A Ping that answered nil for a store that cannot ping would
		// report a closed memory store as healthy.
		if _, ok := c.(store.Pinger); ok {
			t.Errorf("%T offers Ping; memstore does not", c)
		}
	}
	pinging, err := idemotel.WrapStore(pinger{mem}, idemotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := pinging.(store.Pinger); !ok || p.Ping(ctx) == nil {
		t.Error("the wrapper of a store with Ping hides it, or does not call it")
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	ops := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "idemkit.store.duration" {
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					op, _ := dp.Attributes.Value("idemkit.store.operation")
					ops[op.AsString()] += dp.Count
				}
			}
		}
	}
	if ops["SetNXBatch"] != 1 || ops["SetNXValue"] != 1 {
		t.Errorf("measured operations: %v, want one SetNXBatch and one SetNXValue", ops)
	}
}

// The wrapper against the rule of every store wrapper (package
// internal/storewrap), over stores with each set of optional interfaces.
func TestWrapStoreFollowsTheWrapperRule(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	captest.Check(t, func(t *testing.T, s store.Store) store.Store {
		w, err := idemotel.WrapStore(s, idemotel.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}, captest.Exactly)
}
