package tiered_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/internal/fake"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
)

// Shared doubles (package fake), under the names the tests use.
type (
	faultyStore = fake.Faulty

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

// tieredStore is a store tiered.New returned, with its Close, Stats and
// State at hand for the tests.
type tieredStore struct{ store.Store }

func (s tieredStore) Close() error { return s.Store.(store.Closer).Close() }

func (s tieredStore) Stats() tiered.Stats {
	st, ok := tiered.StatsOf(s.Store)
	if !ok {
		panic("not a tiered store")
	}
	return st
}

func (s tieredStore) State() tiered.BreakerState { return s.Stats().State }

// mustTiered returns a tiered store over p and f that recognises the
// engine's records, or fails tb.
func mustTiered(tb testing.TB, p, f store.Store, opts ...tiered.Option) tieredStore {
	tb.Helper()
	s, err := tiered.New(p, f, idemkit.Supersedes, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return tieredStore{s}
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

// hangDetector bounds waits that must end; it is far above any expected
// wait, so that it only catches hangs.
const hangDetector = 5 * time.Second

var ctx = context.Background()

// bareStore hides every optional interface of the store it wraps.
type bareStore struct{ store.Store }

// Ping and SetNXValue call the store's; they fail the test (a panic) when
// the store does not have them.
func (s tieredStore) Ping(ctx context.Context) error { return s.Store.(store.Pinger).Ping(ctx) }

func (s tieredStore) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return s.Store.(store.SetNXValuer).SetNXValue(ctx, key, value, ttl)
}
