package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// hungStore stands for a backend that stopped answering and ignores its
// context, as a hung client might.
type hungStore struct{ *memstore.Store }

func (hungStore) Get(ctx context.Context, key string) (store.Entry, error) {
	time.Sleep(time.Second)
	return store.Entry{}, errors.New("too late")
}

func ExampleNew() {
	mem, err := memstore.New()
	if err != nil {
		panic(err)
	}
	s, err := budget.New(hungStore{mem}, 20*time.Millisecond)
	if err != nil {
		panic(err)
	}
	defer s.(store.Closer).Close() // closes mem too
	_, err = s.Get(context.Background(), "k")
	fmt.Println(errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// Every problem is reported, each option by name and a nil option by its
// position; the error wraps idemkit.ErrInvalid.
func ExampleNew_invalid() {
	mem, err := memstore.New()
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	_, err = budget.New(mem, time.Second, budget.WithMaxAbandoned(0), nil)
	fmt.Println(errors.Is(err, idemkit.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// budget: store: invalid argument: WithMaxAbandoned(0): must be at least 1
	// option 2 is nil
}

// A budgeted store is a store.Batcher exactly when the store it wraps is
// (memstore is), and the whole batch runs under the budget.
func ExampleNew_batch() {
	mem, err := memstore.New()
	if err != nil {
		panic(err)
	}
	s, err := budget.New(mem, time.Second, budget.WithInline())
	if err != nil {
		panic(err)
	}
	defer s.(store.Closer).Close()
	b, ok := s.(store.Batcher)
	fmt.Println("batcher:", ok)
	res, err := b.SetNXBatch(context.Background(), []store.BatchItem{
		{Key: "a", Value: []byte("1"), TTL: time.Minute},
		{Key: "a", Value: []byte("2"), TTL: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].Set, res[1].Set, string(res[1].Existing.Value))
	// Output:
	// batcher: true
	// true false 1
}
