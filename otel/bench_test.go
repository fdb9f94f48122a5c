package idemotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemkit/idemkit"
	idemotel "github.com/idemkit/idemkit/otel"
)

// BenchmarkReplay compares a memstore Do replay with the no-op observer and
// with the OTel observer (metrics on, no tracer), in the same run:
//
//	cd otel && go test -run '^$' -bench Replay -benchmem -count 5
func BenchmarkReplay(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	obs, err := idemotel.NewObserver(idemotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  idemkit.Option
	}{{"noop", idemkit.WithObserver(nil)}, {"otel", idemkit.WithObserver(obs)}} {
		b.Run(c.name, func(b *testing.B) {
			mem := mustMem()
			defer mem.Close()
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
