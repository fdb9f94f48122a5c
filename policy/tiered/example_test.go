package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

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

func ExampleNew() {
	primary := downStore{} // in production: budget.New(redisstore, ...)
	fallback, err := memstore.New()
	if err != nil {
		panic(err)
	}
	s, err := tiered.New(primary, fallback, idemkit.Supersedes,
		tiered.WithFailureThreshold(2),
		tiered.WithObserver(func(ev tiered.Event) { fmt.Println("breaker:", ev.Kind) }))
	if err != nil {
		panic(err)
	}
	defer s.(store.Closer).Close() // closes the primary and the fallback too

	engine, err := idemkit.New(s, idemkit.WithObserver(nil))
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
	st, _ := tiered.StatsOf(s)
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

// Every problem is reported, each option by name and a nil option by its
// position; the error wraps idemkit.ErrInvalid.
func ExampleNew_invalid() {
	mem, err := memstore.New()
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	_, err = tiered.New(mem, mem, nil, tiered.WithCoolDown(0), nil)
	fmt.Println(errors.Is(err, idemkit.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// tiered: store: invalid argument: nil supersedes predicate
	// WithCoolDown(0s): must be positive
	// option 2 is nil
}
