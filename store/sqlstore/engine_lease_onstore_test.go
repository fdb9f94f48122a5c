package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
)

// The lease in the all-inside mode (idemkit's OnStore over a transaction
// view): the row lock keeps duplicates out, so a transaction that runs
// longer than the lease must not lose its claim for it.

// onStoreLease is the lease of these tests, and onStorePast a wait safely
// past it: the database's clock decides expiry, so the wait is real, and
// kept short.
const (
	onStoreLease = 10 * time.Millisecond
	onStorePast  = 5 * onStoreLease
)

// TestEngineOnStoreOutlivesTheLease runs Do on a view bound to the
// business transaction, with fn writing the order and running well past
// the lease while eight duplicates wait (WithWait) on the store: Do
// succeeds, nobody else runs, and after the commit every duplicate gets
// the committed result. Before the fix, Do failed with "lease lost;
// outcome not recorded" and the order stayed committed without a record.
func TestEngineOnStoreOutlivesTheLease(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithLease(onStoreLease))
			if err != nil {
				t.Fatal(err)
			}
			tx := k.begin(t, s, orders)
			inTx, err := e.OnStore(tx.view)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			var wg sync.WaitGroup
			dups := make([]error, 8)
			res, err := inTx.Do(ctx, "order-1", "fp", func(ctx context.Context) ([]byte, error) {
				runs.Add(1)
				if err := tx.insert(ctx, "order-1"); err != nil {
					return nil, err
				}
				for i := range dups {
					wg.Go(func() {
						res, err := e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
							runs.Add(1)
							return []byte("duplicate"), nil
						}, idemkit.WithWait(time.Millisecond))
						if err == nil && (!res.Replayed || string(res.Value) != "order #1") {
							err = fmt.Errorf("duplicate got %+v, want the committed result replayed", res)
						}
						dups[i] = err
					})
				}
				if _, early := waitForLockWait(t, k.b, nil); early {
					t.Error("no duplicate waited on the transaction's row")
				}
				time.Sleep(onStorePast) // the transaction runs on past the lease
				return []byte("order #1"), nil
			})
			if err != nil {
				t.Fatalf("Do in a transaction longer than the lease: %v", err)
			}
			if string(res.Value) != "order #1" {
				t.Fatalf("Do = %q, want order #1", res.Value)
			}
			if err := tx.commit(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if err := errors.Join(dups...); err != nil {
				t.Fatal(err)
			}
			if n := countOrders(t, k.b, orders); n != 1 || runs.Load() != 1 {
				t.Fatalf("%d orders, %d runs; want 1 and 1", n, runs.Load())
			}
		})
	}
}

// TestEngineOnStoreCommitWithoutEnding: a caller who claims through an
// OnStore view and commits without ending the claim has committed its
// work with no result recorded. The key then answers ErrInProgress, past
// the lease, rather than letting a retry run the work a second time;
// Forget frees it.
func TestEngineOnStoreCommitWithoutEnding(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithLease(onStoreLease))
			if err != nil {
				t.Fatal(err)
			}
			tx := k.begin(t, s, orders)
			inTx, err := e.OnStore(tx.view)
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := inTx.Begin(ctx, "order-1", "fp")
			if err != nil || c == nil {
				t.Fatalf("Begin = %v, %v; want a claim", c, err)
			}
			if err := tx.insert(ctx, "order-1"); err != nil {
				t.Fatal(err)
			}
			if err := tx.commit(ctx); err != nil { // and c is never ended
				t.Fatal(err)
			}
			time.Sleep(onStorePast)
			_, err = e.Do(ctx, "order-1", "fp", func(context.Context) ([]byte, error) {
				return nil, errors.New("the committed work ran again")
			})
			if !errors.Is(err, idemkit.ErrInProgress) {
				t.Fatalf("a retry past the lease = %v, want ErrInProgress", err)
			}
			if ok, err := e.Forget(ctx, idemkit.ModeDo, "order-1"); err != nil || !ok {
				t.Fatalf("Forget = %v, %v", ok, err)
			}
		})
	}
}

// TestEngineOnStoreTokenOutlivesTheLease: UseToken on a view bound to the
// business transaction, with fn running past the lease, records its result
// as Do does; after the commit a reuse replays it.
func TestEngineOnStoreTokenOutlivesTheLease(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithLease(onStoreLease))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := e.IssueToken(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			tx := k.begin(t, s, orders)
			inTx, err := e.OnStore(tx.view)
			if err != nil {
				t.Fatal(err)
			}
			res, err := inTx.UseToken(ctx, "alice", tok.Value, func(ctx context.Context) ([]byte, error) {
				time.Sleep(onStorePast)
				return []byte("paid"), tx.insert(ctx, "order-1")
			})
			if err != nil || string(res.Value) != "paid" {
				t.Fatalf("UseToken in a transaction longer than the lease = %+v, %v", res, err)
			}
			if err := tx.commit(ctx); err != nil {
				t.Fatal(err)
			}
			res, err = e.UseToken(ctx, "alice", tok.Value, func(context.Context) ([]byte, error) {
				return nil, errors.New("the token ran twice")
			})
			if err != nil || !res.Replayed || string(res.Value) != "paid" {
				t.Fatalf("reuse = %+v, %v; want the committed result replayed", res, err)
			}
		})
	}
}
