package nearcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/policy/internal/fake"
	"github.com/idemkit/idemkit/policy/nearcache"
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
	newFaulty       = fake.NewFaulty
	newFaultyValuer = fake.NewValuer
	newMem          = testkit.NewMem
	newEngine       = fake.NewEngine
)

// nearStore is a store nearcache.New returned, with its Close and Stats at
// hand for the tests.
type nearStore struct{ store.Store }

func (s nearStore) Close() error { return s.Store.(store.Closer).Close() }

func (s nearStore) Stats() nearcache.Stats {
	st, ok := nearcache.StatsOf(s.Store)
	if !ok {
		panic("not a near cache")
	}
	return st
}

// mustNear returns nearcache.New(s, settled, opts...) or fails tb.
func mustNear(tb testing.TB, s store.Store, settled func([]byte) bool, opts ...nearcache.Option) nearStore {
	tb.Helper()
	nc, err := nearcache.New(s, settled, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return nearStore{nc}
}

var ctx = context.Background()

// bareStore hides every optional interface of the store it wraps.
type bareStore struct{ store.Store }

// Ping and SetNXValue call the store's; they fail the test (a panic) when
// the store does not have them.
func (s nearStore) Ping(ctx context.Context) error { return s.Store.(store.Pinger).Ping(ctx) }

func (s nearStore) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return s.Store.(store.SetNXValuer).SetNXValue(ctx, key, value, ttl)
}
