package policy_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// Behaviours of a faultyStore.
const (
	healthy  int32 = iota
	failing        // every call fails with ErrUnavailable at once
	hanging        // every call blocks, ignoring its context, until the test ends
	stalling       // every call blocks until its context is done
)

// faultyStore is a memstore that fails or stalls on command, and counts
// the calls it receives.
type faultyStore struct {
	*memstore.Store
	mode    atomic.Int32
	calls   atomic.Int64
	release chan struct{}
}

func newFaulty(t *testing.T) *faultyStore {
	f := &faultyStore{Store: newMem(t), release: make(chan struct{})}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(f.release) }) })
	return f
}

func (f *faultyStore) set(mode int32) { f.mode.Store(mode) }

// gate applies the current behaviour before a call reaches the memstore.
func (f *faultyStore) gate(ctx context.Context, op string) error {
	f.calls.Add(1)
	switch f.mode.Load() {
	case failing:
		return store.Unavailable(op, errInjected)
	case hanging:
		<-f.release
		return store.Unavailable(op, errInjected)
	case stalling:
		select {
		case <-ctx.Done():
			return store.Unavailable(op, ctx.Err())
		case <-f.release:
			return store.Unavailable(op, errInjected)
		}
	}
	return nil
}

var errInjected = errorString("injected fault")

type errorString string

func (e errorString) Error() string { return string(e) }

func (f *faultyStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := f.gate(ctx, "SetNX"); err != nil {
		return false, store.Entry{}, err
	}
	return f.Store.SetNX(ctx, key, value, ttl)
}

func (f *faultyStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := f.gate(ctx, "Get"); err != nil {
		return store.Entry{}, err
	}
	return f.Store.Get(ctx, key)
}

func (f *faultyStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := f.gate(ctx, "CompareAndSwap"); err != nil {
		return false, err
	}
	return f.Store.CompareAndSwap(ctx, key, old, new, ttl)
}

func (f *faultyStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := f.gate(ctx, "CompareAndDelete"); err != nil {
		return false, err
	}
	return f.Store.CompareAndDelete(ctx, key, old)
}

func (f *faultyStore) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := f.gate(ctx, "Consume"); err != nil {
		return nil, err
	}
	return f.Store.Consume(ctx, key)
}

// Ping makes a faultyStore a store.Pinger that obeys the same behaviour.
func (f *faultyStore) Ping(ctx context.Context) error { return f.gate(ctx, "Ping") }

// bareStore hides every optional interface of the store it wraps.
type bareStore struct{ store.Store }

// readingStore is a store that, when released, reads the value it was
// given, to show that Budget hands a detached call its own copy.
type readingStore struct {
	bareStore
	release chan struct{}
	seen    chan []byte
}

func (r *readingStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	<-r.release
	r.seen <- append([]byte(nil), value...)
	return r.bareStore.SetNX(ctx, key, value, ttl)
}

// mustBudget returns policy.Budget(s, d, opts...) or fails tb.
func mustBudget(tb testing.TB, s store.Store, d time.Duration, opts ...policy.BudgetOption) store.Store {
	tb.Helper()
	b, err := policy.Budget(s, d, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// mustTiered returns a Tiered over p and f that recognises the engine's
// records, or fails tb.
func mustTiered(tb testing.TB, p, f store.Store, opts ...policy.TieredOption) *policy.Tiered {
	tb.Helper()
	s, err := policy.NewTiered(p, f, idemkit.Supersedes, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// mustNear returns policy.NewNearCache(s, settled, opts...) or fails tb.
func mustNear(tb testing.TB, s store.Store, settled func([]byte) bool, opts ...policy.NearOption) *policy.NearCache {
	tb.Helper()
	nc, err := policy.NewNearCache(s, settled, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return nc
}

// countingCloser is a faultyStore that counts calls to Close.
type countingCloser struct {
	*faultyStore
	closes atomic.Int32
}

func (c *countingCloser) Close() error {
	c.closes.Add(1)
	return c.faultyStore.Close()
}

// pausingGet is a store whose first Get of key reads the entry and then
// waits for release before returning it, so a test can hold a copy-forward
// between its read of the fallback and its write to the primary.
type pausingGet struct {
	bareStore
	key     string
	paused  atomic.Bool
	entered chan struct{}
	release chan struct{}
	// lateCAD is closed by the first CompareAndDelete of key that starts
	// after release: the paused copier's last store call.
	lateCAD  chan struct{}
	lateOnce atomic.Bool
}

func (p *pausingGet) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	ok, err := p.bareStore.CompareAndDelete(ctx, key, old)
	select {
	case <-p.release:
		if key == p.key && p.lateOnce.CompareAndSwap(false, true) {
			close(p.lateCAD)
		}
	default:
	}
	return ok, err
}

// waitLateCAD waits for the paused copier to finish its copy.
func (p *pausingGet) waitLateCAD(t *testing.T) {
	t.Helper()
	select {
	case <-p.lateCAD:
	case <-time.After(hangDetector):
		t.Fatal("the copier never finished its copy")
	}
}

func newPausingGet(t *testing.T, key string) *pausingGet {
	return &pausingGet{bareStore: bareStore{newMem(t)}, key: key, entered: make(chan struct{}), release: make(chan struct{}), lateCAD: make(chan struct{})}
}

func (p *pausingGet) Get(ctx context.Context, key string) (store.Entry, error) {
	e, err := p.bareStore.Get(ctx, key)
	if key == p.key && p.paused.CompareAndSwap(false, true) {
		close(p.entered)
		<-p.release
	}
	return e, err
}

// hungGet is a store whose Get blocks, ignoring its context, until release
// is closed.
type hungGet struct {
	bareStore
	release chan struct{}
	calls   atomic.Int64
}

func (h *hungGet) Get(ctx context.Context, key string) (store.Entry, error) {
	h.calls.Add(1)
	<-h.release
	return h.bareStore.Get(ctx, key)
}

// newMem returns a memstore closed when the test ends, or fails tb.
func newMem(tb testing.TB) *memstore.Store {
	tb.Helper()
	m, err := memstore.New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	return m
}
