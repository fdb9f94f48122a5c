package idemotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemkit/idemkit/completer"
	idemopts "github.com/idemkit/idemkit/internal/options"
)

// keyCompleterOutcome is the attribute of idemkit.completer.operations.
const keyCompleterOutcome = attribute.Key("idemkit.completer.outcome")

// Completer records the metrics of the completer package:
//
//   - idemkit.completer.operations, a counter of the abandoned operations
//     a pass handled, by idemkit.completer.outcome (completer.Kind:
//     resumed, failed, reported, taken, error);
//   - idemkit.completer.abandoned, a gauge of the abandoned operations
//     the last pass found, resumed or not;
//   - idemkit.completer.passes, a counter of passes, with error.type set
//     on those whose listing failed.
//
// Give its Outcome method to completer.WithOutcomes and its Pass method
// to completer.WithPasses.
type Completer struct {
	ops       metric.Int64Counter
	abandoned metric.Int64Gauge
	passes    metric.Int64Counter
	kinds     [completer.KindError + 1]metric.AddOption
	failed    metric.AddOption
}

// NewCompleter returns a Completer recording to the meter provider given
// with WithMeterProvider, which it requires; it refuses the other
// options. Errors wrap idemkit.ErrInvalid.
func NewCompleter(opts ...Option) (*Completer, error) {
	var o options
	errs := idemopts.Collect(&o, opts)
	if o.mp == nil {
		errs = append(errs, errors.New("NewCompleter: WithMeterProvider is required"))
	}
	if o.tp != nil {
		errs = append(errs, errors.New("WithTracerProvider: NewCompleter records metrics only"))
	}
	if o.next != nil {
		errs = append(errs, errors.New("WithNext: NewCompleter has no events to pass on"))
	}
	if err := idemopts.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemotel: %w", err)
	}
	m := o.mp.Meter(scope)
	c := &Completer{failed: metric.WithAttributes(keyErrorType.String("listing"))}
	var errs3 [3]error
	c.ops, errs3[0] = m.Int64Counter("idemkit.completer.operations", metric.WithUnit("{operation}"),
		metric.WithDescription("Abandoned operations a completer pass handled, by outcome."))
	c.abandoned, errs3[1] = m.Int64Gauge("idemkit.completer.abandoned", metric.WithUnit("{operation}"),
		metric.WithDescription("Abandoned operations the last completer pass found."))
	c.passes, errs3[2] = m.Int64Counter("idemkit.completer.passes", metric.WithUnit("{pass}"),
		metric.WithDescription("Completer passes; error.type is set on those whose listing failed."))
	if err := errors.Join(errs3[:]...); err != nil {
		return nil, fmt.Errorf("idemotel: instruments: %w", err)
	}
	for k := completer.KindResumed; k <= completer.KindError; k++ {
		c.kinds[k] = metric.WithAttributes(keyCompleterOutcome.String(k.String()))
	}
	return c, nil
}

// Outcome counts o; give it to completer.WithOutcomes.
func (c *Completer) Outcome(o completer.Outcome) {
	k := o.Kind()
	if int(k) >= len(c.kinds) || c.kinds[k] == nil {
		k = completer.KindError
	}
	c.ops.Add(context.Background(), 1, c.kinds[k])
}

// Pass records a pass: the number of abandoned operations it found, or a
// failed pass; give it to completer.WithPasses.
func (c *Completer) Pass(r completer.Resumed, err error) {
	ctx := context.Background()
	if err != nil {
		c.passes.Add(ctx, 1, c.failed)
		return
	}
	c.passes.Add(ctx, 1)
	c.abandoned.Record(ctx, int64(len(r.Abandoned)))
}
