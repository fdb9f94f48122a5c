package idemotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	idemopts "github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// Store wraps a store.Store with a span and a latency measurement per
// operation. WrapStore builds it, extended with Ping, SetNXValue and
// SetNXBatch when the wrapped store has them.
type Store struct {
	next     store.Store
	tracer   trace.Tracer
	duration metric.Float64Histogram
	ops      map[string]metric.MeasurementOption
}

var storeOps = []string{"SetNX", "Get", "CompareAndSwap", "CompareAndDelete", "Consume", "SetNXValue", "SetNXBatch"}

// WrapStore returns s with every operation measured (idemkit.store.duration)
// and traced (a span per operation) with the providers of the options. The
// result has Close (passed through to s when s has it) and is a
// store.Pinger, a store.SetNXValuer and a store.Batcher exactly when s is,
// so a type assertion answers as it would on s: the engine uses s as it
// would unwrapped, and a health check does not take a store that cannot
// ping for one that answers. Errors wrap store.ErrInvalid; WithNext,
// which has no events to pass on here, is refused.
func WrapStore(s store.Store, opts ...Option) (store.Store, error) {
	var o options
	errs := idemopts.Collect(&o, opts)
	if s == nil {
		errs = append([]error{errors.New("nil store")}, errs...)
	}
	if o.next != nil {
		errs = append(errs, errors.New("WithNext: a store has no events to pass on; give it to NewObserver"))
	}
	if err := idemopts.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemotel: %w", err)
	}
	if o.mp == nil {
		o.mp = noopMeters
	}
	if o.tp == nil {
		o.tp = noopTracers
	}
	h, err := o.mp.Meter(scope).Float64Histogram("idemkit.store.duration", metric.WithUnit("s"),
		metric.WithDescription("Store operation latency."),
		metric.WithExplicitBucketBoundaries(secondsBuckets...))
	if err != nil {
		return nil, fmt.Errorf("idemotel: instruments: %w", err)
	}
	w := &Store{next: s, tracer: o.tp.Tracer(scope), duration: h, ops: map[string]metric.MeasurementOption{}}
	for _, op := range storeOps {
		w.ops[op] = metric.WithAttributeSet(attribute.NewSet(keyOperation.String(op)))
	}
	_, p := s.(store.Pinger)
	_, v := s.(store.SetNXValuer)
	_, b := s.(store.Batcher)
	switch {
	case p && v && b:
		return withPVB{w, pingOp{w}, valueOp{w}, batchOp{w}}, nil
	case p && v:
		return withPV{w, pingOp{w}, valueOp{w}}, nil
	case p && b:
		return withPB{w, pingOp{w}, batchOp{w}}, nil
	case v && b:
		return withVB{w, valueOp{w}, batchOp{w}}, nil
	case p:
		return withP{w, pingOp{w}}, nil
	case v:
		return withV{w, valueOp{w}}, nil
	case b:
		return withB{w, batchOp{w}}, nil
	}
	return w, nil
}

// pingOp, valueOp and batchOp give a wrapper Ping, SetNXValue and
// SetNXBatch; WrapStore embeds those the wrapped store has.
type (
	pingOp  struct{ w *Store }
	valueOp struct{ w *Store }
	batchOp struct{ w *Store }
)

// Ping pings the wrapped store.
func (o pingOp) Ping(ctx context.Context) error { return o.w.next.(store.Pinger).Ping(ctx) }

// SetNXValue measures the wrapped store's SetNXValue.
func (o valueOp) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return o.w.setNXValue(ctx, key, value, ttl)
}

// SetNXBatch measures the wrapped store's SetNXBatch.
func (o batchOp) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	return o.w.setNXBatch(ctx, items)
}

// The wrappers of stores with Ping (P), SetNXValue (V) or SetNXBatch (B).
type (
	withP struct {
		*Store
		pingOp
	}
	withV struct {
		*Store
		valueOp
	}
	withB struct {
		*Store
		batchOp
	}
	withPV struct {
		*Store
		pingOp
		valueOp
	}
	withPB struct {
		*Store
		pingOp
		batchOp
	}
	withVB struct {
		*Store
		valueOp
		batchOp
	}
	withPVB struct {
		*Store
		pingOp
		valueOp
		batchOp
	}
)

func (w *Store) setNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, existing []byte, err error) {
	w.measure(ctx, "SetNXValue", func(ctx context.Context) error {
		set, existing, err = w.next.(store.SetNXValuer).SetNXValue(ctx, key, value, ttl)
		return err
	})
	return set, existing, err
}

func (w *Store) setNXBatch(ctx context.Context, items []store.BatchItem) (res []store.BatchResult, err error) {
	w.measure(ctx, "SetNXBatch", func(ctx context.Context) error {
		res, err = w.next.(store.Batcher).SetNXBatch(ctx, items)
		return err
	})
	return res, err
}

// measure runs one operation in a span and records its latency.
func (w *Store) measure(ctx context.Context, op string, f func(context.Context) error) {
	ctx, span := w.tracer.Start(ctx, "idemkit.store."+op, trace.WithSpanKind(trace.SpanKindClient))
	start := time.Now()
	err := f(ctx)
	elapsed := time.Since(start).Seconds()
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t := storeErrorType(err)
		w.duration.Record(ctx, elapsed, metric.WithAttributes(keyOperation.String(op), keyErrorType.String(t)))
		span.SetStatus(codes.Error, t)
		span.SetAttributes(keyErrorType.String(t))
	} else {
		w.duration.Record(ctx, elapsed, w.ops[op])
	}
	span.End()
}

func storeErrorType(err error) string {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, store.ErrInvalid):
		return "invalid"
	case errors.Is(err, store.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other"
}

// SetNX measures the wrapped store's SetNX.
func (w *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, existing store.Entry, err error) {
	w.measure(ctx, "SetNX", func(ctx context.Context) error {
		set, existing, err = w.next.SetNX(ctx, key, value, ttl)
		return err
	})
	return set, existing, err
}

// Get measures the wrapped store's Get.
func (w *Store) Get(ctx context.Context, key string) (ent store.Entry, err error) {
	w.measure(ctx, "Get", func(ctx context.Context) error {
		ent, err = w.next.Get(ctx, key)
		return err
	})
	return ent, err
}

// CompareAndSwap measures the wrapped store's CompareAndSwap.
func (w *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (ok bool, err error) {
	w.measure(ctx, "CompareAndSwap", func(ctx context.Context) error {
		ok, err = w.next.CompareAndSwap(ctx, key, old, new, ttl)
		return err
	})
	return ok, err
}

// CompareAndDelete measures the wrapped store's CompareAndDelete.
func (w *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (ok bool, err error) {
	w.measure(ctx, "CompareAndDelete", func(ctx context.Context) error {
		ok, err = w.next.CompareAndDelete(ctx, key, old)
		return err
	})
	return ok, err
}

// Consume measures the wrapped store's Consume.
func (w *Store) Consume(ctx context.Context, key string) (v []byte, err error) {
	w.measure(ctx, "Consume", func(ctx context.Context) error {
		v, err = w.next.Consume(ctx, key)
		return err
	})
	return v, err
}

// Close closes the wrapped store when it is a store.Closer.
func (w *Store) Close() error {
	if c, ok := w.next.(store.Closer); ok {
		return c.Close()
	}
	return nil
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Closer = (*Store)(nil)
	_ interface {
		store.Closer
		store.Pinger
		store.SetNXValuer
		store.Batcher
	} = withPVB{}
)
