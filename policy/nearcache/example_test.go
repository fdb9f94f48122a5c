package nearcache_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/nearcache"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

func ExampleNew() {
	remote, err := memstore.New() // in production: the shared store, e.g. Redis
	if err != nil {
		panic(err)
	}
	near, err := nearcache.New(remote, idemkit.Settled)
	if err != nil {
		panic(err)
	}
	defer near.(store.Closer).Close() // closes remote too
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
	st, _ := nearcache.StatsOf(near)
	fmt.Println("answered locally:", st.Hits)
	// Output:
	// receipt-7 false
	// receipt-7 true
	// receipt-7 true
	// answered locally: 1
}

// Every problem is reported, each option by name and a nil option by its
// position; the error wraps idemkit.ErrInvalid.
func ExampleNew_invalid() {
	_, err := nearcache.New(nil, idemkit.Settled, nearcache.WithCapacity(0), nil)
	fmt.Println(errors.Is(err, idemkit.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// nearcache: store: invalid argument: nil store
	// WithCapacity(0): must be at least 1
	// option 2 is nil
}
