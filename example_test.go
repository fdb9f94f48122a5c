package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store/memstore"
)

// Guard rejects a repeat of the same request fingerprint inside a window.
func ExampleEngine_Guard() {
	ctx := context.Background()
	e, _ := idemkit.New(memstore.New(), idemkit.WithObserver(nil), idemkit.WithWindow(3*time.Second))
	fp := new(keying.Fingerprinter).Sum("user-1", "POST /orders", nil, []byte(`{"sku":"A1","qty":1}`))
	submit := func(context.Context) error { fmt.Println("order submitted"); return nil }

	fmt.Println(e.Guard(ctx, fp, submit))
	err := e.Guard(ctx, fp, submit) // the double click
	fmt.Println(errors.Is(err, idemkit.ErrDuplicate))
	// Output:
	// order submitted
	// <nil>
	// true
}

// Do runs an operation once per idempotency key and replays its result.
func ExampleEngine_Do() {
	ctx := context.Background()
	e, _ := idemkit.New(memstore.New(), idemkit.WithObserver(nil))
	charge := func(context.Context) ([]byte, error) {
		fmt.Println("charging the card")
		return []byte(`{"charge":"ch_1"}`), nil
	}
	for range 3 { // the client retries after a timeout
		res, err := e.Do(ctx, "user-1/pay-7f3a", "payload-fingerprint", charge)
		fmt.Println(string(res.Value), res.Replayed, err)
	}
	// Output:
	// charging the card
	// {"charge":"ch_1"} false <nil>
	// {"charge":"ch_1"} true <nil>
	// {"charge":"ch_1"} true <nil>
}

// The typed helper encodes results with JSON by default.
func ExampleDo() {
	type receipt struct {
		Order string `json:"order"`
		Total int    `json:"total"`
	}
	ctx := context.Background()
	e, _ := idemkit.New(memstore.New(), idemkit.WithObserver(nil))
	place := func(context.Context) (receipt, error) { return receipt{Order: "o-1", Total: 1200}, nil }
	r1, _, _ := idemkit.Do(ctx, e, "k", "", place)
	r2, res, _ := idemkit.Do(ctx, e, "k", "", place)
	fmt.Println(r1 == r2, res.Replayed)
	// Output: true true
}

// One-time tokens: issue one per form, accept it once.
func ExampleEngine_UseToken() {
	ctx := context.Background()
	e, _ := idemkit.New(memstore.New(), idemkit.WithObserver(nil))
	tok, _ := e.IssueToken(ctx, "user-1")
	pay := func(context.Context) ([]byte, error) { fmt.Println("paid"); return []byte("receipt-1"), nil }

	res, err := e.UseToken(ctx, "user-1", tok.Value, pay)
	fmt.Println(string(res.Value), res.Replayed, err)
	res, err = e.UseToken(ctx, "user-1", tok.Value, pay) // resubmitted form
	fmt.Println(string(res.Value), res.Replayed, err)
	_, err = e.UseToken(ctx, "user-2", tok.Value, pay) // someone else's token
	fmt.Println(errors.Is(err, idemkit.ErrTokenInvalid))
	// Output:
	// paid
	// receipt-1 false <nil>
	// receipt-1 true <nil>
	// true
}
