package idemotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	idemotel "github.com/idemkit/idemkit/otel"
)

// Every option of the package, for NewObserver and for WrapStore: a valid
// value is accepted where the option applies; an invalid value, an option
// the constructor cannot use, and a nil option are refused with an error
// wrapping idemkit.ErrInvalid that names the option (or its position).
func TestOptionsFollowTheOptionRule(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	tp := sdktrace.NewTracerProvider()
	next := idemkit.ObserverFunc(func(_ context.Context, _ idemkit.Event) {})
	mem := testkit.NewMem(t)
	observer := func(opts ...idemotel.Option) error { _, err := idemotel.NewObserver(opts...); return err }
	wrap := func(opts ...idemotel.Option) error { _, err := idemotel.WrapStore(mem, opts...); return err }
	for _, c := range []struct {
		name  string
		build func(...idemotel.Option) error
		opts  []idemotel.Option
		want  string // "" for accepted
	}{
		{"NewObserver WithMeterProvider", observer, []idemotel.Option{idemotel.WithMeterProvider(mp)}, ""},
		{"NewObserver WithMeterProvider(nil)", observer, []idemotel.Option{idemotel.WithMeterProvider(nil)}, "WithMeterProvider(nil)"},
		{"NewObserver WithTracerProvider", observer, []idemotel.Option{idemotel.WithTracerProvider(tp)}, ""},
		{"NewObserver WithTracerProvider(nil)", observer, []idemotel.Option{idemotel.WithTracerProvider(nil)}, "WithTracerProvider(nil)"},
		{"NewObserver WithNext", observer, []idemotel.Option{idemotel.WithMeterProvider(mp), idemotel.WithNext(next)}, ""},
		{"NewObserver WithNext(nil)", observer, []idemotel.Option{idemotel.WithMeterProvider(mp), idemotel.WithNext(nil)}, "WithNext(nil)"},
		{"NewObserver nil option", observer, []idemotel.Option{idemotel.WithMeterProvider(mp), nil}, "option 2 is nil"},
		{"WrapStore WithMeterProvider", wrap, []idemotel.Option{idemotel.WithMeterProvider(mp)}, ""},
		{"WrapStore WithMeterProvider(nil)", wrap, []idemotel.Option{idemotel.WithMeterProvider(nil)}, "WithMeterProvider(nil)"},
		{"WrapStore WithTracerProvider", wrap, []idemotel.Option{idemotel.WithTracerProvider(tp)}, ""},
		{"WrapStore WithTracerProvider(nil)", wrap, []idemotel.Option{idemotel.WithTracerProvider(nil)}, "WithTracerProvider(nil)"},
		// A store has no events to pass on: WithNext would do nothing.
		{"WrapStore WithNext", wrap, []idemotel.Option{idemotel.WithMeterProvider(mp), idemotel.WithNext(next)}, "WithNext"},
		{"WrapStore nil option", wrap, []idemotel.Option{nil, idemotel.WithMeterProvider(mp)}, "option 1 is nil"},
	} {
		err := c.build(c.opts...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.name, err)
		case c.want != "" && !errors.Is(err, idemkit.ErrInvalid):
			t.Errorf("%s: %v, want an error wrapping ErrInvalid", c.name, err)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q does not name %q", c.name, err, c.want)
		}
	}
}
