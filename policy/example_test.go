package policy_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// slowStore stands for a backend that stopped answering.
type slowStore struct{ store.Store }

func (slowStore) Get(ctx context.Context, key string) (store.Entry, error) {
	time.Sleep(time.Second) // ignores ctx, as a hung client might
	return store.Entry{}, errors.New("too late")
}

func ExampleBudget() {
	s := policy.Budget(slowStore{memstore.New()}, 20*time.Millisecond)
	_, err := s.Get(context.Background(), "k")
	fmt.Println(errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// downStore stands for a primary that cannot be reached.
type downStore struct{ store.Store }

func (downStore) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, store.Unavailable("SetNX", errors.New("connection refused"))
}

func ExampleNewTiered() {
	primary := downStore{memstore.New()} // in production: policy.Budget(redisstore, ...)
	tiered := policy.NewTiered(primary, memstore.New(),
		policy.WithFailureThreshold(2),
		policy.WithTierObserver(func(ev policy.TierEvent) { fmt.Println("breaker:", ev.Kind) }))
	defer tiered.Close()

	engine, err := idemkit.New(tiered, idemkit.WithObserver(nil))
	if err != nil {
		panic(err)
	}
	work := func(context.Context) error { fmt.Println("charged"); return nil }
	for range 3 { // a request and two repeats, while the primary is down
		if err := engine.Guard(context.Background(), "order-42", work); err != nil {
			fmt.Println(errors.Is(err, idemkit.ErrDuplicate))
		}
	}
	st := tiered.Stats()
	fmt.Println(st.State, st.FallbackOps, st.Journal)
	// Output:
	// charged
	// breaker: open
	// true
	// true
	// open 3 1
}

func ExampleNewNearCache() {
	remote := memstore.New() // in production: the shared store, e.g. Redis
	near := policy.NewNearCache(remote, policy.WithSettled(idemkit.Settled))
	engine, err := idemkit.New(near, idemkit.WithObserver(nil))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	pay := func(context.Context) ([]byte, error) { return []byte("receipt-7"), nil }
	for range 3 {
		res, err := engine.Do(ctx, "payment-7", "fp", pay)
		if err != nil {
			panic(err)
		}
		fmt.Println(string(res.Value), res.Replayed)
	}
	st := near.Stats()
	fmt.Println("answered locally:", st.Hits)
	// Output:
	// receipt-7 false
	// receipt-7 true
	// receipt-7 true
	// answered locally: 1
}
