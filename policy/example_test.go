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
type slowStore struct{ downStore }

func (slowStore) Get(ctx context.Context, key string) (store.Entry, error) {
	time.Sleep(time.Second) // ignores ctx, as a hung client might
	return store.Entry{}, errors.New("too late")
}

func ExampleBudget() {
	s, err := policy.Budget(slowStore{}, 20*time.Millisecond)
	if err != nil {
		panic(err)
	}
	_, err = s.Get(context.Background(), "k")
	fmt.Println(errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

func ExampleBudget_invalid() {
	_, err := policy.Budget(downStore{}, time.Second, policy.WithMaxAbandoned(0))
	fmt.Println(errors.Is(err, store.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// policy: store: invalid argument: WithMaxAbandoned(0): must be at least 1
}

// downStore stands for a primary that cannot be reached.
type downStore struct{}

var errRefused = store.Unavailable("dial", errors.New("connection refused"))

func (downStore) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, errRefused
}
func (downStore) Get(context.Context, string) (store.Entry, error) { return store.Entry{}, errRefused }
func (downStore) CompareAndSwap(context.Context, string, []byte, []byte, time.Duration) (bool, error) {
	return false, errRefused
}
func (downStore) CompareAndDelete(context.Context, string, []byte) (bool, error) {
	return false, errRefused
}
func (downStore) Consume(context.Context, string) ([]byte, error) { return nil, errRefused }

func ExampleNewTiered() {
	primary := downStore{} // in production: policy.Budget(redisstore, ...)
	fallback, err := memstore.New()
	if err != nil {
		panic(err)
	}
	tiered, err := policy.NewTiered(primary, fallback, idemkit.Supersedes,
		policy.WithFailureThreshold(2),
		policy.WithTierObserver(func(ev policy.TierEvent) { fmt.Println("breaker:", ev.Kind) }))
	if err != nil {
		panic(err)
	}
	defer tiered.Close() // closes the primary and the fallback too

	engine, err := idemkit.New(tiered, idemkit.WithObserver(nil))
	if err != nil {
		panic(err)
	}
	work := func(context.Context) error { fmt.Println("charged"); return nil }
	for range 4 { // a request and three retries, while the primary is down
		err := engine.Guard(context.Background(), "order-42", work)
		switch {
		case err == nil:
			fmt.Println("admitted")
		case errors.Is(err, idemkit.ErrUnavailable):
			fmt.Println("unavailable: the primary may hold the claim, retry later")
		case errors.Is(err, idemkit.ErrDuplicate):
			fmt.Println("duplicate")
		}
	}
	st := tiered.Stats()
	fmt.Println(st.State, st.PrimaryFailed, st.FallbackOps, st.Journal)
	// Output:
	// breaker: open
	// unavailable: the primary may hold the claim, retry later
	// charged
	// admitted
	// duplicate
	// duplicate
	// open 2 3 1
}

func ExampleNewNearCache() {
	remote, err := memstore.New() // in production: the shared store, e.g. Redis
	if err != nil {
		panic(err)
	}
	near, err := policy.NewNearCache(remote, idemkit.Settled)
	if err != nil {
		panic(err)
	}
	defer near.Close() // closes remote too
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
