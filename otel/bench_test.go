package idemotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	idemotel "github.com/idemkit/idemkit/otel"
)

// BenchmarkReplay compares a memstore Do replay with the no-op observer,
// the OTel observer with metrics only, and with metrics and spans (an SDK
// tracer provider without exporter), in the same run:
//
//	cd otel && go test -run '^$' -bench Replay -benchmem -count 5
//
// Instruction counts, stable on a loaded machine (valgrind callgrind):
//
//	CGO_ENABLED=0 go test -c -o /tmp/otel.test . && ../scripts/callgrind-ops.sh /tmp/otel.test BenchmarkReplay/noop BenchmarkReplay/otel
func BenchmarkReplay(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	obs, err := idemotel.NewObserver(idemotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	traced, err := idemotel.NewObserver(idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(sdktrace.NewTracerProvider()))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  idemkit.Option
	}{{"noop", idemkit.WithObserver(nil)}, {"otel", idemkit.WithObserver(obs)}, {"otel-traced", idemkit.WithObserver(traced)}} {
		b.Run(c.name, func(b *testing.B) {
			mem := testkit.NewMem(b)
			e, err := idemkit.New(mem, c.opt)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			fn := func(context.Context) ([]byte, error) { return []byte("result"), nil }
			if _, err := e.Do(ctx, "k", "fp", fn); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := e.Do(ctx, "k", "fp", fn); err != nil || !res.Replayed {
					b.Fatal(res, err)
				}
			}
		})
	}
}
