package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idemkit"
)

// TestEngineStepRecordsInTheStepsTransaction: a step writes an order and
// records its recovery point (idemkit.RecordStepIn) in one transaction.
// Rolled back, neither stays and the retry runs the step again; committed,
// both do, and a retry of the operation (whose later work failed) does not
// run the step again: one order.
func TestEngineStepRecordsInTheStepsTransaction(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil))
			if err != nil {
				t.Fatal(err)
			}
			errLater := errors.New("a later step failed")
			commit, runs := false, 0
			op := func(ctx context.Context) ([]byte, error) {
				if _, err := idemkit.Step(ctx, "place order", func(ctx context.Context) ([]byte, error) {
					runs++
					tx := k.begin(t, s, orders)
					if err := tx.insert(ctx, "order-1"); err != nil {
						return nil, errors.Join(err, tx.rollback(ctx))
					}
					if err := idemkit.RecordStepIn(ctx, tx.view, []byte("order #1")); err != nil {
						return nil, errors.Join(err, tx.rollback(ctx))
					}
					if !commit {
						return nil, tx.rollback(ctx)
					}
					return nil, tx.commit(ctx)
				}); err != nil {
					return nil, err
				}
				return nil, errLater
			}
			if _, err := e.Do(ctx, "op-1", "fp", op); err == nil || errors.Is(err, errLater) {
				t.Fatalf("Do with the step rolled back = %v, want the step's error", err)
			}
			if n := countOrders(t, k.b, orders); n != 0 {
				t.Fatalf("%d orders after the rollback, want 0", n)
			}
			commit = true
			for range 2 {
				if _, err := e.Do(ctx, "op-1", "fp", op); !errors.Is(err, errLater) {
					t.Fatalf("Do = %v, want %v", err, errLater)
				}
			}
			if n := countOrders(t, k.b, orders); n != 1 || runs != 2 {
				t.Fatalf("%d orders, the step ran %d times; want 1 and 2", n, runs)
			}
		})
	}
}
