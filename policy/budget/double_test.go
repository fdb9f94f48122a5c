package budget_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/internal/fake"
	"github.com/idemkit/idemkit/store"
)

// Shared doubles (package fake), under the names the tests use.
type (
	countingCloser = fake.CountingCloser
)

const (
	healthy  = fake.Healthy
	failing  = fake.Failing
	hanging  = fake.Hanging
	stalling = fake.Stalling
)

var (
	errInjected     = fake.ErrInjected
	newFaulty       = fake.NewFaulty
	newFaultyValuer = fake.NewValuer
	newMem          = testkit.NewMem
	newEngine       = fake.NewEngine
	everyOp         = fake.EveryOp
)

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

// mustBudget returns budget.New(s, d, opts...) or fails tb.
func mustBudget(tb testing.TB, s store.Store, d time.Duration, opts ...budget.Option) store.Store {
	tb.Helper()
	b, err := budget.New(s, d, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return b
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

// bareStore hides every optional interface of the store it wraps.
type bareStore struct{ store.Store }
