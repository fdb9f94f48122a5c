// Package fake holds the test doubles and benchmark helpers shared by the
// tests of budget, tiered and nearcache: stores that fail, hang or stall
// on command and count their calls.
package fake

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// Behaviours of a Faulty store.
const (
	Healthy  int32 = iota
	Failing        // every call fails with ErrUnavailable at once
	Hanging        // every call blocks, ignoring its context, until the test ends
	Stalling       // every call blocks until its context is done
)

// Faulty is a memstore that fails or stalls on command, and counts the
// calls it receives. It is a store.Pinger obeying the same behaviour.
type Faulty struct {
	*memstore.Store
	mode    atomic.Int32
	Calls   atomic.Int64
	release chan struct{}
}

// NewFaulty returns a healthy Faulty store whose hanging calls return when
// the test ends.
func NewFaulty(t *testing.T) *Faulty {
	f := &Faulty{Store: testkit.NewMem(t), release: make(chan struct{})}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(f.release) }) })
	return f
}

// Set switches the store's behaviour.
func (f *Faulty) Set(mode int32) { f.mode.Store(mode) }

// gate applies the current behaviour before a call reaches the memstore.
func (f *Faulty) gate(ctx context.Context, op string) error {
	f.Calls.Add(1)
	switch f.mode.Load() {
	case Failing:
		return store.Unavailable(op, ErrInjected)
	case Hanging:
		<-f.release
		return store.Unavailable(op, ErrInjected)
	case Stalling:
		select {
		case <-ctx.Done():
			return store.Unavailable(op, ctx.Err())
		case <-f.release:
			return store.Unavailable(op, ErrInjected)
		}
	}
	return nil
}

// ErrInjected is the cause of a Faulty store's failures.
var ErrInjected = errorString("injected fault")

type errorString string

func (e errorString) Error() string { return string(e) }

// SetNX implements store.Store.
func (f *Faulty) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := f.gate(ctx, "SetNX"); err != nil {
		return false, store.Entry{}, err
	}
	return f.Store.SetNX(ctx, key, value, ttl)
}

// Get implements store.Store.
func (f *Faulty) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := f.gate(ctx, "Get"); err != nil {
		return store.Entry{}, err
	}
	return f.Store.Get(ctx, key)
}

// CompareAndSwap implements store.Store.
func (f *Faulty) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := f.gate(ctx, "CompareAndSwap"); err != nil {
		return false, err
	}
	return f.Store.CompareAndSwap(ctx, key, old, new, ttl)
}

// CompareAndDelete implements store.Store.
func (f *Faulty) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := f.gate(ctx, "CompareAndDelete"); err != nil {
		return false, err
	}
	return f.Store.CompareAndDelete(ctx, key, old)
}

// Consume implements store.Store.
func (f *Faulty) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := f.gate(ctx, "Consume"); err != nil {
		return nil, err
	}
	return f.Store.Consume(ctx, key)
}

// SetNXBatch implements store.Batcher under the same behaviour.
func (f *Faulty) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := f.gate(ctx, "SetNXBatch"); err != nil {
		return nil, err
	}
	return f.Store.SetNXBatch(ctx, items)
}

// Ping makes a Faulty store a store.Pinger that obeys the same behaviour.
func (f *Faulty) Ping(ctx context.Context) error { return f.gate(ctx, "Ping") }

// CountingCloser is a Faulty store that counts calls to Close.
type CountingCloser struct {
	*Faulty
	Closes atomic.Int32
}

// Close counts the call and closes the memstore.
func (c *CountingCloser) Close() error {
	c.Closes.Add(1)
	return c.Faulty.Close()
}

// Valuer is a Faulty store that is also a store.SetNXValuer, obeying the
// same behaviour and counting its SetNXValue calls apart.
type Valuer struct {
	*Faulty
	ValueCalls atomic.Int64
}

// NewValuer returns a healthy Valuer.
func NewValuer(t *testing.T) *Valuer { return &Valuer{Faulty: NewFaulty(t)} }

// SetNXValue implements store.SetNXValuer.
func (f *Valuer) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	f.ValueCalls.Add(1)
	if err := f.gate(ctx, "SetNXValue"); err != nil {
		return false, nil, err
	}
	set, e, err := f.Store.SetNX(ctx, key, value, ttl)
	return set, e.Value, err
}

var _ store.SetNXValuer = (*Valuer)(nil)

// EveryOp runs each Store operation once against s and returns its error.
func EveryOp(ctx context.Context, s store.Store) map[string]error {
	v := []byte("v")
	errs := map[string]error{}
	_, _, errs["SetNX"] = s.SetNX(ctx, "k", v, time.Minute)
	_, errs["Get"] = s.Get(ctx, "k")
	_, errs["CompareAndSwap"] = s.CompareAndSwap(ctx, "k", v, v, time.Minute)
	_, errs["CompareAndDelete"] = s.CompareAndDelete(ctx, "k", v)
	_, errs["Consume"] = s.Consume(ctx, "k")
	return errs
}
