package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

func Example() {
	s, err := memstore.New(memstore.WithCapacity(10_000), memstore.WithSweepInterval(time.Minute))
	if err != nil {
		panic(err)
	}
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

func ExampleNew_invalidOption() {
	_, err := memstore.New(memstore.WithCapacity(0))
	fmt.Println(err)
	fmt.Println("invalid:", errors.Is(err, store.ErrInvalid))
	// Output:
	// memstore: store: invalid argument: WithCapacity(0): capacity must be at least 1
	// invalid: true
}

func ExampleWithOnEvict() {
	s, err := memstore.New(memstore.WithCapacity(1), memstore.WithOnEvict(func(key string) {
		fmt.Println("evicted live entry:", key)
	}))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()

	_, _, _ = s.SetNX(ctx, "a", []byte("1"), time.Hour)
	_, _, _ = s.SetNX(ctx, "b", []byte("2"), time.Hour)
	fmt.Println("evictions:", s.Evictions())
	// Output:
	// evicted live entry: a
	// evictions: 1
}

func ExampleWithScopeQuota() {
	// The scope is the key's text up to its last ':' ("tenant:alice").
	scopeOf := func(key string) string {
		i := strings.LastIndexByte(key, ':')
		return key[:max(i, 0)]
	}
	s, err := memstore.New(memstore.WithScopeQuota(2, scopeOf), memstore.WithOnEvict(func(key string) {
		fmt.Println("evicted:", key)
	}))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()

	_, _, _ = s.SetNX(ctx, "tenant:bob:1", []byte("claim"), time.Hour)
	for _, key := range []string{"tenant:alice:1", "tenant:alice:2", "tenant:alice:3"} {
		_, _, _ = s.SetNX(ctx, key, []byte("claim"), time.Hour)
	}
	_, err = s.Get(ctx, "tenant:bob:1")
	fmt.Println("bob's entry kept:", err == nil)
	// Output:
	// evicted: tenant:alice:1
	// bob's entry kept: true
}

func ExampleWithMaxBytes() {
	s, err := memstore.New(memstore.WithMaxBytes(1 << 20))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ctx := context.Background()

	_, _, _ = s.SetNX(ctx, "k", make([]byte, 100), time.Hour)
	fmt.Println("bytes counted:", s.Bytes(), "=", 1+100+memstore.EntryOverhead)

	_, _, err = s.SetNX(ctx, "huge", make([]byte, 2<<20), time.Hour)
	fmt.Println("too large:", errors.Is(err, memstore.ErrTooLarge))
	// Output:
	// bytes counted: 261 = 261
	// too large: true
}

// A store whose room is all taken by claims in progress refuses a new
// key rather than evict one (which would let a duplicate run the work
// again): the engine answers ErrUnavailable, and does not run the work.
func Example_fullOfClaims() {
	s, err := memstore.New(memstore.WithCapacity(1), memstore.WithShards(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Do(ctx, "charge-1", "", func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte("charged"), nil
		})
	}()
	<-started
	_, err = e.Do(ctx, "charge-2", "", func(context.Context) ([]byte, error) {
		return []byte("charged"), nil
	})
	fmt.Println(errors.Is(err, memstore.ErrFull), errors.Is(err, idemkit.ErrUnavailable), s.Refusals())
	close(release)
	<-done
	res, err := e.Do(ctx, "charge-2", "", func(context.Context) ([]byte, error) {
		return []byte("charged"), nil
	})
	fmt.Println(string(res.Value), err, s.Evictions())
	// Output:
	// true true 1
	// charged <nil> 1
}
