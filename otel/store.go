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
	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
)

// Store wraps a store.Store with a span and a latency measurement per
// operation. WrapStore builds it, extended with the optional interfaces of
// the wrapped store.
type Store struct {
	next     store.Store
	tracer   trace.Tracer
	duration metric.Float64Histogram
	ops      map[string]metric.MeasurementOption
}

var storeOps = []string{"SetNX", "Get", "CompareAndSwap", "CompareAndDelete", "Consume", "SetNXValue", "SetNXBatch", "Scan"}

// WrapStore returns s with every operation measured (idemkit.store.duration)
// and traced (a span per operation) with the providers of the options. The
// result is a store.Closer, store.Pinger, store.SetNXValuer, store.Batcher
// and store.Scanner exactly when s is (the rule of every idemkit store
// wrapper; Scan is measured and traced too), so a type assertion answers as it would on s: the engine uses s as it
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
	return storewrap.Build(w, storewrap.Of(s), storewrap.Methods{
		Close:      w.Close,
		Ping:       w.ping,
		SetNXValue: w.setNXValue,
		SetNXBatch: w.setNXBatch,
		Scan:       w.scan,
	}), nil
}

// ping pings the wrapped store.
func (w *Store) ping(ctx context.Context) error { return w.next.(store.Pinger).Ping(ctx) }

func (w *Store) scan(ctx context.Context, prefix string, fn func(string, store.Entry) bool) (err error) {
	w.measure(ctx, "Scan", func(ctx context.Context) error {
		err = w.next.(store.Scanner).Scan(ctx, prefix, fn)
		return err
	})
	return err
}

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

// Close closes the wrapped store; the wrapper has it when that store is a
// store.Closer.
func (w *Store) Close() error {
	if c, ok := w.next.(store.Closer); ok {
		return c.Close()
	}
	return nil
}

var _ store.Store = (*Store)(nil)
