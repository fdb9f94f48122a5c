package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store/memstore"
)

func Example() {
	s := memstore.New(memstore.WithCapacity(10_000), memstore.WithSweepInterval(time.Minute))
	defer s.Close()
	ctx := context.Background()

	set, _, _ := s.SetNX(ctx, "order:42", []byte("in-progress"), time.Minute)
	fmt.Println("first request claims the key:", set)

	set, existing, _ := s.SetNX(ctx, "order:42", []byte("in-progress"), time.Minute)
	fmt.Printf("duplicate claims it: %v, sees %q\n", set, existing.Value)

	done, _ := s.CompareAndSwap(ctx, "order:42", []byte("in-progress"), []byte("done"), time.Hour)
	fmt.Println("first request records its result:", done)
	// Output:
	// first request claims the key: true
	// duplicate claims it: false, sees "in-progress"
	// first request records its result: true
}

func ExampleWithOnEvict() {
	s := memstore.New(memstore.WithCapacity(1), memstore.WithOnEvict(func(key string) {
		fmt.Println("evicted live entry:", key)
	}))
	defer s.Close()
	ctx := context.Background()

	_, _, _ = s.SetNX(ctx, "a", []byte("1"), time.Hour)
	_, _, _ = s.SetNX(ctx, "b", []byte("2"), time.Hour)
	fmt.Println("evictions:", s.Evictions())
	// Output:
	// evicted live entry: a
	// evictions: 1
}
