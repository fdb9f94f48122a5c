package budget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
)

// Default is a time budget for a store call to a Redis on the same
// network: above the p99.9 measured on a loaded 2-core machine. See the
// package documentation ("Sizing the budget") for the measurements and for
// how to size your own.
const Default = time.Second

// New returns a store.Store that gives each call to s a time budget of d:
// a call that overruns it returns an error wrapping store.ErrUnavailable
// and context.DeadlineExceeded, and the caller's own cancellation is
// reported as the caller's. By default each call is detached, so even a
// store that ignores its context is cut off at d; see the package
// documentation ("Time budget").
//
// The result implements store.Closer, store.Pinger, store.SetNXValuer,
// store.Batcher and store.Scanner exactly when s does: it owns s, so Close
// closes s (once); Ping, SetNXValue and SetNXBatch run s's under the
// budget, as every call does; Scan runs under the caller's context only. A nil s, a
// d <= 0 or an invalid option is an error wrapping store.ErrInvalid that
// names every problem.
func New(s store.Store, d time.Duration, opts ...Option) (store.Store, error) {
	var errs []error
	if s == nil {
		errs = append(errs, errors.New("nil store"))
	}
	if d <= 0 {
		errs = append(errs, fmt.Errorf("time budget %v: must be positive", d))
	}
	c := config{maxAbandoned: DefaultMaxAbandoned}
	errs = append(errs, options.Collect(&c, opts)...)
	if c.inline && c.maxAbandonedSet {
		errs = append(errs, errors.New("WithMaxAbandoned: no calls are detached with WithInline"))
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	b := &budget{s: s, d: d, inline: c.inline, maxAbandoned: int64(c.maxAbandoned), cutOff: make(map[string]*cutOffCalls)}
	return storewrap.Build(b, storewrap.Of(s), storewrap.Methods{
		Close:      (&storewrap.OnceCloser{S: s}).Close,
		Ping:       b.ping,
		SetNXValue: b.setNXValue,
		SetNXBatch: b.setNXBatch,
		Scan:       b.scan,
	}), nil
}

type budget struct {
	s            store.Store
	d            time.Duration
	inline       bool
	maxAbandoned int64
	abandoned    atomic.Int64 // detached calls cut off and still running

	mu     sync.Mutex
	cutOff map[string]*cutOffCalls // keys with cut-off calls still running
}

// cutOffCalls are the calls on one key cut off at their budget and still
// running: landed is closed when the last of them returns.
type cutOffCalls struct {
	running int
	landed  chan struct{}
}

var _ store.Store = (*budget)(nil)

// outcome carries a detached call's results back to the caller.
type outcome[T any] struct {
	v   T
	err error
}

// within runs call, an operation on key ("" for none), under the budget
// and maps a budget overrun to ErrUnavailable.
func within[T any](b *budget, ctx context.Context, op, key string, call func(context.Context) (T, error)) (T, error) {
	return withinKeys(b, ctx, op, key, nil, call)
}

// withinKeys is within for an operation on key, or, when keys is not nil,
// on each of keys (a batch).
func withinKeys[T any](b *budget, ctx context.Context, op, key string, keys []string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, callerDone(op, err)
	}
	bctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	if err := b.waitCutOff(ctx, bctx, op, key); err != nil {
		return zero, err
	}
	for _, k := range keys {
		if err := b.waitCutOff(ctx, bctx, op, k); err != nil {
			return zero, err
		}
	}
	if b.inline {
		v, err := call(bctx)
		return v, b.check(ctx, bctx, op, err)
	}
	return detach(b, ctx, bctx, op, key, keys, call)
}

// States of a detached call.
const (
	callRunning int32 = iota
	callFinished
	callAbandoned
)

// detachedCall is one call running on its own goroutine.
type detachedCall[T any] struct {
	key   string
	keys  []string // a batch's keys, nil for a single call
	done  chan outcome[T]
	state atomic.Int32
}

// run makes the call and hands its outcome over; if the caller abandoned
// it meanwhile, it no longer counts against the bound, and calls waiting
// for it on its key go on.
func (c *detachedCall[T]) run(b *budget, bctx context.Context, call func(context.Context) (T, error)) {
	v, err := call(bctx)
	c.done <- outcome[T]{v, err}
	if !c.state.CompareAndSwap(callRunning, callFinished) {
		b.abandoned.Add(-1)
		b.mu.Lock()
		c.each(func(key string) {
			if cc := b.cutOff[key]; cc != nil {
				if cc.running--; cc.running == 0 {
					delete(b.cutOff, key)
					close(cc.landed)
				}
			}
		})
		b.mu.Unlock()
	}
}

// abandon marks c abandoned, unless it finished, and from then on makes
// calls on its key wait for it (see waitCutOff).
func (c *detachedCall[T]) abandon(b *budget) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		return false
	}
	c.each(func(key string) {
		cc := b.cutOff[key]
		if cc == nil {
			cc = &cutOffCalls{landed: make(chan struct{})}
			b.cutOff[key] = cc
		}
		cc.running++
	})
	return true
}

// each calls f with every key of c: its key, or its batch's keys.
func (c *detachedCall[T]) each(f func(key string)) {
	if c.key != "" {
		f(c.key)
	}
	for _, key := range c.keys {
		f(key)
	}
}

// waitCutOff waits, within the budget, until no call on key that was cut
// off at its budget is still running: such a call (a claim) may still
// land, and the call that follows it (its undo) must not overtake it.
func (b *budget) waitCutOff(ctx, bctx context.Context, op, key string) error {
	if key == "" || b.abandoned.Load() == 0 {
		return nil
	}
	b.mu.Lock()
	cc := b.cutOff[key]
	b.mu.Unlock()
	if cc == nil {
		return nil
	}
	landed := cc.landed
	select {
	case <-landed:
		return nil
	case <-bctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return callerDone(op, err)
	}
	return b.overrun(op, errors.New("an earlier call on the key, cut off at its budget, is still running"))
}

// detach runs call on its own goroutine and waits for it until bctx is
// done, unless too many earlier calls are still running past their budget.
func detach[T any](b *budget, ctx, bctx context.Context, op, key string, keys []string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	if b.abandoned.Load() >= b.maxAbandoned {
		return zero, fmt.Errorf("budget: %s: %w: %d calls still running past their time budget of %v", op, store.ErrUnavailable, b.maxAbandoned, b.d)
	}
	c := &detachedCall[T]{key: key, keys: keys, done: make(chan outcome[T], 1)}
	go c.run(b, bctx, call)
	select {
	case r := <-c.done:
		return r.v, b.check(ctx, bctx, op, r.err)
	case <-bctx.Done():
	}
	if !c.abandon(b) {
		r := <-c.done // finished just in time: prefer the real answer
		return r.v, b.check(ctx, bctx, op, r.err)
	}
	b.abandoned.Add(1)
	if err := ctx.Err(); err != nil {
		return zero, callerDone(op, err)
	}
	return zero, b.overrun(op, nil)
}

// check makes sure an error of a call that ran past the budget says so,
// even when the wrapped store reported it some other way.
func (b *budget) check(ctx, bctx context.Context, op string, err error) error {
	if err == nil || bctx.Err() == nil || ctx.Err() != nil {
		return err
	}
	if errors.Is(err, store.ErrUnavailable) && errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return b.overrun(op, err)
}

// overrun is the error of a call cut off by the budget; cause, if not nil,
// is what the store reported.
func (b *budget) overrun(op string, cause error) error {
	if cause == nil {
		return fmt.Errorf("budget: %s: %w: time budget of %v exceeded: %w", op, store.ErrUnavailable, b.d, context.DeadlineExceeded)
	}
	return fmt.Errorf("budget: %s: %w: time budget of %v exceeded: %w: %w", op, store.ErrUnavailable, b.d, context.DeadlineExceeded, cause)
}

// callerDone is the error of a call whose caller's context is done: it
// wraps ctx.Err(), and ErrUnavailable for a deadline.
func callerDone(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return store.Unavailable("budget: "+op, err)
	}
	return fmt.Errorf("budget: %s: %w", op, err)
}

// clone copies v for a detached call; a nil v stays nil so the store still
// rejects it.
func (b *budget) clone(v []byte) []byte {
	if b.inline {
		return v
	}
	return bytes.Clone(v)
}

type setResult struct {
	set bool
	e   store.Entry
}

// SetNX implements store.Store.
func (b *budget) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	value = b.clone(value)
	r, err := within(b, ctx, "SetNX", key, func(ctx context.Context) (setResult, error) {
		set, e, err := b.s.SetNX(ctx, key, value, ttl)
		return setResult{set, e}, err
	})
	return r.set, r.e, err
}

// setNXValue runs the wrapped store's SetNXValue under the budget, as
// SetNX runs. It is exposed only when the wrapped store is a
// store.SetNXValuer.
func (b *budget) setNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	sv := b.s.(store.SetNXValuer)
	value = b.clone(value)
	r, err := within(b, ctx, "SetNXValue", key, func(ctx context.Context) (valueResult, error) {
		set, existing, err := sv.SetNXValue(ctx, key, value, ttl)
		return valueResult{set, existing}, err
	})
	return r.set, r.existing, err
}

// Get implements store.Store.
func (b *budget) Get(ctx context.Context, key string) (store.Entry, error) {
	return within(b, ctx, "Get", key, func(ctx context.Context) (store.Entry, error) {
		return b.s.Get(ctx, key)
	})
}

// CompareAndSwap implements store.Store.
func (b *budget) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	old, new = b.clone(old), b.clone(new)
	return within(b, ctx, "CompareAndSwap", key, func(ctx context.Context) (bool, error) {
		return b.s.CompareAndSwap(ctx, key, old, new, ttl)
	})
}

// CompareAndDelete implements store.Store.
func (b *budget) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	old = b.clone(old)
	return within(b, ctx, "CompareAndDelete", key, func(ctx context.Context) (bool, error) {
		return b.s.CompareAndDelete(ctx, key, old)
	})
}

// Consume implements store.Store.
func (b *budget) Consume(ctx context.Context, key string) ([]byte, error) {
	return within(b, ctx, "Consume", key, func(ctx context.Context) ([]byte, error) {
		return b.s.Consume(ctx, key)
	})
}

// ping runs the wrapped store's Ping under the budget. It is exposed only
// when the wrapped store is a store.Pinger.
func (b *budget) ping(ctx context.Context) error {
	p, ok := b.s.(store.Pinger)
	if !ok {
		return nil
	}
	_, err := within(b, ctx, "Ping", "", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.Ping(ctx)
	})
	return err
}

// setNXBatch runs the wrapped store's SetNXBatch under one budget for the
// whole call. It waits, as a single call does, for cut-off calls on any of
// its keys, and when it is cut off itself, later calls on any of its keys
// wait for it. It is exposed only when the wrapped store is a
// store.Batcher.
func (b *budget) setNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	bs := b.s.(store.Batcher)
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = it.Key
	}
	if !b.inline {
		items = slices.Clone(items)
		for i := range items {
			items[i].Value = bytes.Clone(items[i].Value)
		}
	}
	return withinKeys(b, ctx, "SetNXBatch", "", keys, func(ctx context.Context) ([]store.BatchResult, error) {
		return bs.SetNXBatch(ctx, items)
	})
}

// scan runs the wrapped store's Scan under the caller's context, not the
// budget: it lists a whole store and calls fn on the caller's goroutine.
// It is exposed only when the wrapped store is a store.Scanner.
func (b *budget) scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	return b.s.(store.Scanner).Scan(ctx, prefix, fn)
}

type valueResult struct {
	set      bool
	existing []byte
}
