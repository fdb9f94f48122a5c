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

	"github.com/idemkit/idemkit/store"
)

// Store wraps a store.Store with a span and a latency measurement per
// operation. WrapStore builds it, extended with SetNXValue and SetNXBatch
// when the wrapped store has them.
type Store struct {
	next     store.Store
	tracer   trace.Tracer
	duration metric.Float64Histogram
	ops      map[string]metric.MeasurementOption
}

var storeOps = []string{"SetNX", "Get", "CompareAndSwap", "CompareAndDelete", "Consume", "SetNXValue", "SetNXBatch"}

// WrapStore returns s with every operation measured (idemkit.store.duration)
// and traced (a span per operation) with the providers of the options. The
// result is a *Store, which has Close and Ping (passed through to s when s
// has them); it is also a store.SetNXValuer and a store.Batcher exactly
// when s is, so a type assertion answers as it would on s and the engine
// uses s as it would unwrapped. Errors wrap store.ErrInvalid.
func WrapStore(s store.Store, opts ...Option) (store.Store, error) {
	if s == nil {
		return nil, fmt.Errorf("idemotel: %w: nil store", store.ErrInvalid)
	}
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("idemotel: %w: %w", store.ErrInvalid, err)
		}
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
	_, v := s.(store.SetNXValuer)
	_, b := s.(store.Batcher)
	switch {
	case v && b:
		return valuerBatcher{w}, nil
	case v:
		return valuer{w}, nil
	case b:
		return batcher{w}, nil
	}
	return w, nil
}

// The wrappers of stores that have SetNXValue, SetNXBatch or both.
type (
	valuer        struct{ *Store }
	batcher       struct{ *Store }
	valuerBatcher struct{ *Store }
)

// SetNXValue measures the wrapped store's SetNXValue.
func (w valuer) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return w.setNXValue(ctx, key, value, ttl)
}

// SetNXBatch measures the wrapped store's SetNXBatch.
func (w batcher) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	return w.setNXBatch(ctx, items)
}

// SetNXValue measures the wrapped store's SetNXValue.
func (w valuerBatcher) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return w.setNXValue(ctx, key, value, ttl)
}

// SetNXBatch measures the wrapped store's SetNXBatch.
func (w valuerBatcher) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	return w.setNXBatch(ctx, items)
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

// Close closes the wrapped store when it is a store.Closer.
func (w *Store) Close() error {
	if c, ok := w.next.(store.Closer); ok {
		return c.Close()
	}
	return nil
}

// Ping pings the wrapped store when it is a store.Pinger.
func (w *Store) Ping(ctx context.Context) error {
	if p, ok := w.next.(store.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.Closer      = (*Store)(nil)
	_ store.Pinger      = (*Store)(nil)
	_ store.SetNXValuer = valuer{}
	_ store.Batcher     = batcher{}
	_ store.SetNXValuer = valuerBatcher{}
	_ store.Batcher     = valuerBatcher{}
)
