package sqlstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
)

// TestEngineDoCompletesInFnsTransaction runs Do with a function that
// writes the order and completes its own claim (idemkit.ClaimFromContext)
// in one transaction, as an adapter's handler does: a rollback frees the
// key and leaves no order; then 32 callers race at the key, one runs and
// commits, and every caller gets the committed result.
func TestEngineDoCompletesInFnsTransaction(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWait(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			errRollback := errors.New("rolled back")
			var runs atomic.Int32
			place := func(commit bool) func(context.Context) ([]byte, error) {
				return func(ctx context.Context) ([]byte, error) {
					runs.Add(1)
					tx := k.begin(t, s, orders)
					if err := tx.insert(ctx, "order-1"); err != nil {
						return nil, err
					}
					if err := idemkit.ClaimFromContext(ctx).CompleteIn(ctx, tx.view, []byte("order #1")); err != nil {
						return nil, errors.Join(err, tx.rollback(ctx))
					}
					if !commit {
						return nil, errors.Join(errRollback, tx.rollback(ctx))
					}
					return []byte("fn's own value"), tx.commit(ctx)
				}
			}
			if _, err := e.Do(ctx, "order-1", "fp", place(false)); !errors.Is(err, errRollback) {
				t.Fatalf("Do with a rolled-back transaction = %v, want %v", err, errRollback)
			}
			if n := countOrders(t, k.b, orders); n != 0 {
				t.Fatalf("%d orders after the rollback, want 0", n)
			}
			runs.Store(0)
			var wg sync.WaitGroup
			errs := make([]error, 32)
			for i := range errs {
				wg.Go(func() {
					res, err := e.Do(ctx, "order-1", "fp", place(true))
					if err == nil && string(res.Value) != "order #1" {
						err = errors.New("got " + string(res.Value) + ", want the recorded result")
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if n := countOrders(t, k.b, orders); n != 1 || runs.Load() != 1 {
				t.Fatalf("%d orders, %d runs; want 1 and 1", n, runs.Load())
			}
		})
	}
}
