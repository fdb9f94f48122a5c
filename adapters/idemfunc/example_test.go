package idemfunc_test

import (
	"context"
	"errors"
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
	store, _ := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	balance := 0
	credit := func(_ context.Context, ev PaymentEvent) (int, error) {
		balance += ev.Amount
		return balance, nil
	}
	handle, err := idemfunc.Wrap(engine, "credit", func(ev PaymentEvent) (string, error) { return ev.ID, nil }, credit)
	if err != nil {
		fmt.Println(err)
		return
	}

	ev := PaymentEvent{ID: "evt_1", Amount: 500}
	for range 3 {
		got, res, err := handle(context.Background(), ev)
		fmt.Println(got, res.Replayed, err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// 500 false <nil>
	// 500 true <nil>
	// 500 true <nil>
	// balance: 500
}

// Two consumers of the same event, each wrapped under its own name, run
// once each: the receipt e-mail is not skipped because the credit already
// ran for that event ID.
func ExampleWrap_twoConsumers() {
	store, _ := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	byID := func(ev PaymentEvent) (string, error) { return ev.ID, nil }
	credit, _ := idemfunc.Wrap(engine, "credit", byID, func(_ context.Context, ev PaymentEvent) (int, error) {
		fmt.Println("credited", ev.Amount)
		return ev.Amount, nil
	})
	receipt, _ := idemfunc.Wrap(engine, "send-receipt", byID, func(_ context.Context, ev PaymentEvent) (string, error) {
		fmt.Println("receipt sent for", ev.ID)
		return "sent", nil
	})

	ev := PaymentEvent{ID: "evt_2", Amount: 120}
	for range 2 { // delivered twice
		_, _, _ = credit(context.Background(), ev)
		_, _, _ = receipt(context.Background(), ev)
	}
	// Output:
	// credited 120
	// receipt sent for evt_2
}

var ErrDeclined = errors.New("card declined")

// A declined charge is final: registered with idemkit.FinalErrors, it is
// stored and every redelivery gets it back, still matching ErrDeclined
// under errors.Is, without charging again.
func ExampleWrap_finalErrors() {
	store, _ := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	charge, _ := idemfunc.Wrap(engine, "charge",
		func(ev PaymentEvent) (string, error) { return ev.ID, nil },
		func(_ context.Context, ev PaymentEvent) (string, error) {
			fmt.Println("charging", ev.Amount)
			return "", fmt.Errorf("charge %s: %w", ev.ID, ErrDeclined)
		},
		idemfunc.WithEngineOptions[PaymentEvent](idemkit.WithErrorCodec(idemkit.FinalErrors(ErrDeclined))),
	)

	ev := PaymentEvent{ID: "evt_3", Amount: 900}
	for range 2 {
		_, res, err := charge(context.Background(), ev)
		fmt.Println(errors.Is(err, ErrDeclined), res.Replayed, err)
	}
	// Output:
	// charging 900
	// true false charge evt_3: card declined
	// true true charge evt_3: card declined
}
