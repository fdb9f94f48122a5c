package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// Guard rejects a repeat of the same request fingerprint inside a window.
func ExampleEngine_Guard() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithWindow(3*time.Second))
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
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
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
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	place := func(context.Context) (receipt, error) { return receipt{Order: "o-1", Total: 1200}, nil }
	r1, _, _ := idemkit.Do(ctx, e, "k", "", place)
	r2, res, _ := idemkit.Do(ctx, e, "k", "", place)
	fmt.Println(r1 == r2, res.Replayed)
	// Output: true true
}

// One-time tokens: issue one per form, accept it once.
func ExampleEngine_UseToken() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
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

// Under FailOpen a store outage runs the work unguarded, and the result
// says so; the observer gets a fail_open event for every such run.
func ExampleWithFailureMode() {
	ctx := context.Background()
	var unguarded int
	count := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventFailOpen {
			unguarded++
		}
	})
	e, _ := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(count))
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil })
	fmt.Println(errors.Is(err, idemkit.ErrUnavailable)) // fail-closed: nothing ran

	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil },
		idemkit.WithFailureMode(idemkit.FailOpen))
	fmt.Println(string(res.Value), res.Unguarded, err, unguarded)
	// Output:
	// true
	// ran true <nil> 1
}

// Registered final errors are stored and replayed, and keep their identity.
func ExampleFinalErrors() {
	errDeclined := errors.New("card declined")
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil),
		idemkit.WithErrorCodec(idemkit.FinalErrors(errDeclined)))
	charge := func(context.Context) ([]byte, error) {
		fmt.Println("asking the bank")
		return nil, fmt.Errorf("charge 42: %w", errDeclined)
	}
	for range 2 {
		res, err := e.Do(ctx, "pay-42", "", charge)
		fmt.Println(res.Replayed, errors.Is(err, errDeclined), err)
	}
	// Output:
	// asking the bank
	// false true charge 42: card declined
	// true true charge 42: card declined
}

// With WithWait a concurrent duplicate waits for the first execution and
// gets its result, instead of ErrInProgress.
func ExampleWithWait() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	started, finish := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) {
			close(started)
			<-finish
			return []byte("first result"), nil
		})
	}()
	<-started
	_, err := e.Do(ctx, "k", "", nil)
	fmt.Println(errors.Is(err, idemkit.ErrInProgress))
	close(finish)
	res, err := e.Do(ctx, "k", "", nil, idemkit.WithWait(0))
	fmt.Println(string(res.Value), res.Replayed, err)
	// Output:
	// true
	// first result true <nil>
}

// A result too large to keep is returned to the call that ran; by default
// the key keeps a terminal record, so a retry never runs the work again.
func ExampleWithOversized() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithMaxResultSize(16))
	runs := 0
	report := func(context.Context) ([]byte, error) {
		runs++
		return []byte("a report far longer than sixteen bytes"), nil
	}
	for range 2 {
		res, err := e.Do(ctx, "report-7", "", report)
		fmt.Println(len(res.Value), res.Replayed, errors.Is(err, idemkit.ErrResultTooLarge))
	}
	fmt.Println("runs:", runs)
	// With ReleaseKey the key is freed instead, and a retry runs again.
	_, _ = e.Do(ctx, "report-8", "", report, idemkit.WithOversized(idemkit.ReleaseKey))
	_, _ = e.Do(ctx, "report-8", "", report, idemkit.WithOversized(idemkit.ReleaseKey))
	fmt.Println("runs:", runs)
	// Output:
	// 38 false true
	// 0 true true
	// runs: 1
	// runs: 3
}

// An Observer that feeds counters: one per outcome.
func ExampleObserverFunc() {
	var mu sync.Mutex
	counts := map[idemkit.EventKind]int{}
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		mu.Lock()
		counts[ev.Kind]++
		mu.Unlock()
	})
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(obs))
	for range 3 {
		_, _ = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("v"), nil })
	}
	fmt.Println(counts[idemkit.EventAdmitted], counts[idemkit.EventCompleted], counts[idemkit.EventReplayed])
	// Output: 1 1 2
}

// Begin hands the claim to the caller, who ends it: here a consumer that
// records its result before acknowledging a message.
func ExampleEngine_Begin() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	for range 2 { // the broker redelivers
		claim, res, err := e.Begin(ctx, "msg-17", "")
		switch {
		case err != nil:
			fmt.Println("retry later:", err)
		case claim == nil:
			fmt.Println("replayed:", string(res.Value))
		default:
			fmt.Println("processing")
			if err := claim.Complete(ctx, []byte("credited")); err != nil {
				claim.Release(ctx)
			}
		}
	}
	// Output:
	// processing
	// replayed: credited
}

// With builds a per-route view once; its options are checked then.
func ExampleEngine_With() {
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	checkout, err := e.With(idemkit.WithWindow(10*time.Second), idemkit.WithFailureMode(idemkit.FailOpen))
	fmt.Println(checkout != nil, err)
	_, err = e.With(idemkit.WithWindow(-time.Second))
	fmt.Println(errors.Is(err, idemkit.ErrInvalid))
	// Output:
	// true <nil>
	// true
}

// BeginBatch decides a fetched batch of messages in one store call where
// the store can, each message on its own.
func ExampleEngine_BeginBatch() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	_, _ = e.Do(ctx, "m2", "", func(context.Context) ([]byte, error) { return []byte("done before"), nil })
	out, _ := e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "m1"}, {Key: "m2"}, {Key: "m1"}})
	for i, o := range out {
		switch {
		case o.Claim != nil:
			fmt.Println(i, "run")
			_ = o.Claim.Complete(ctx, []byte("ok"))
		case o.Result.Replayed:
			fmt.Println(i, "replayed", string(o.Result.Value))
		default:
			fmt.Println(i, errors.Is(o.Err, idemkit.ErrInProgress))
		}
	}
	// Output:
	// 0 run
	// 1 replayed done before
	// 2 true
}

// Inspect and Forget let support staff see a stuck key and free it.
func ExampleEngine_Forget() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	_, _, _ = e.Begin(ctx, "order-9", "", idemkit.WithScope("alice"), idemkit.WithoutHeartbeat()) // then the process crashed
	info, _ := e.Inspect(ctx, idemkit.ModeDo, "order-9", idemkit.WithScope("alice"))
	fmt.Println(info.State)
	forgot, _ := e.Forget(ctx, idemkit.ModeDo, "order-9", idemkit.WithScope("alice"))
	fmt.Println(forgot)
	// Output:
	// in_progress
	// true
}

// Steps record how far an operation got: the retry after a failure (or a
// crash) replays the steps that finished and runs the first unfinished
// one again, with the same derived key for the provider to deduplicate.
func ExampleStep() {
	ctx := context.Background()
	st, _ := memstore.New()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	providerDown := true
	keys := map[string]bool{}
	placeOrder := func(ctx context.Context) ([]byte, error) {
		if _, err := idemkit.Step(ctx, "reserve stock", func(context.Context) ([]byte, error) {
			fmt.Println("reserving stock")
			return nil, nil
		}); err != nil {
			return nil, err
		}
		return idemkit.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			key, _ := idemkit.StepKey(ctx) // send it as the provider's Idempotency-Key
			keys[key] = true
			fmt.Println("charging the card")
			if providerDown {
				return nil, errors.New("provider timed out")
			}
			return []byte("ch_1"), nil
		})
	}
	_, err := e.Do(ctx, "order-7", "payload-fingerprint", placeOrder)
	fmt.Println(err)
	providerDown = false
	res, err := e.Do(ctx, "order-7", "payload-fingerprint", placeOrder)
	fmt.Println(string(res.Value), err, len(keys), "derived key")
	// Output:
	// reserving stock
	// charging the card
	// provider timed out
	// charging the card
	// ch_1 <nil> 1 derived key
}
