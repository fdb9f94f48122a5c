package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idemkit/idemkit"
)

// The engine's two transaction modes over real databases, with a business
// table whose row is written in the same transaction as the record.

// TestEngineClaimOutsideCompleteInside claims through the store, writes the
// order and completes the claim inside the business transaction: rolled
// back, no order and the key is free again after Release; committed, one
// order and every retry replays.
func TestEngineClaimOutsideCompleteInside(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, commit := range []bool{false, true} {
				claim, _, err := e.Begin(ctx, "order-1", "fp", idemkit.WithScope("alice"))
				if err != nil || claim == nil {
					t.Fatalf("commit=%v: Begin = %v, %v; want a claim", commit, claim, err)
				}
				tx := k.begin(t, s, orders)
				if err := tx.insert(ctx, "order-1"); err != nil {
					t.Fatal(err)
				}
				if err := claim.CompleteIn(ctx, tx.view, []byte("order #1")); err != nil {
					t.Fatalf("CompleteIn: %v", err)
				}
				end := tx.rollback
				if commit {
					end = tx.commit
				}
				if err := end(ctx); err != nil {
					t.Fatal(err)
				}
				claim.Release(ctx) // deferred in real code
			}
			if n := countOrders(t, k.b, orders); n != 1 {
				t.Fatalf("%d orders, want 1", n)
			}
			res, err := e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
				return nil, errors.New("must not run")
			}, idemkit.WithScope("alice"))
			if err != nil || !res.Replayed || string(res.Value) != "order #1" {
				t.Fatalf("retry = %+v, %v; want the committed result replayed", res, err)
			}
		})
	}
}

// TestEngineAllInsideOneTransaction runs Do on a view bound to the business
// transaction while a duplicate runs Do on the store: the duplicate waits
// for the transaction, then replays its result; the order is written once.
func TestEngineAllInsideOneTransaction(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil))
			if err != nil {
				t.Fatal(err)
			}
			tx := k.begin(t, s, orders)
			inTx, err := e.OnStore(tx.view)
			if err != nil {
				t.Fatal(err)
			}
			var runs int
			var mu sync.Mutex
			work := func(ctx context.Context) ([]byte, error) {
				mu.Lock()
				runs++
				mu.Unlock()
				return []byte("order #1"), tx.insert(ctx, "order-1")
			}
			if _, err := inTx.Do(ctx, "order-1", "fp", work); err != nil {
				t.Fatalf("Do in the transaction: %v", err)
			}
			dup := make(chan error, 1)
			go func() {
				res, err := e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
					return nil, errors.New("the duplicate must not run")
				}, idemkit.WithWait(0))
				if err == nil && (!res.Replayed || string(res.Value) != "order #1") {
					err = fmt.Errorf("duplicate got %+v, want the replay", res)
				}
				dup <- err
			}()
			if _, early := waitForLockWait(t, k.b, nil); early {
				t.Fatal("the duplicate did not wait for the transaction")
			}
			if err := tx.commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-dup; err != nil {
				t.Fatal(err)
			}
			if n := countOrders(t, k.b, orders); n != 1 || runs != 1 {
				t.Fatalf("%d orders, %d runs; want 1 and 1", n, runs)
			}
		})
	}
}
