package idemfunc_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/store/memstore"
)

type PaymentEvent struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// A payment callback delivered three times (the provider retried because
// our first answer was lost) credits the account once.
func ExampleWrap() {
	engine, _ := idemkit.New(memstore.New(), idemkit.WithObserver(nil))
	balance := 0
	credit := func(_ context.Context, ev PaymentEvent) (int, error) {
		balance += ev.Amount
		return balance, nil
	}
	handle := idemfunc.Wrap(engine, func(ev PaymentEvent) (string, error) { return ev.ID, nil }, credit)

	ev := PaymentEvent{ID: "evt_1", Amount: 500}
	for range 3 {
		got, err := handle(context.Background(), ev)
		fmt.Println(got, err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// 500 <nil>
	// 500 <nil>
	// 500 <nil>
	// balance: 500
}
