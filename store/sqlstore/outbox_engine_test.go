package sqlstore_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestOutboxWithCompleteIn: the order, its idempotency record and its
// event commit in one transaction through one View. Rolled back, none of
// them exists and the key is free; committed, all three do. Then 16
// concurrent callers of the same key (claim outside, complete and enqueue
// inside) leave one order and one event.
func TestOutboxWithCompleteIn(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newOutboxStore(t, k.b), ordersTable(t, k.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil))
			if err != nil {
				t.Fatal(err)
			}
			place := func(key string, commit bool) (ran bool, err error) {
				claim, _, err := e.Begin(ctx, key, "fp", idemkit.WithScope("alice"))
				if err != nil || claim == nil {
					return false, err // a replay or in progress: nothing to do
				}
				defer claim.Release(ctx)
				tx := k.begin(t, s, orders)
				if err := tx.insert(ctx, key); err != nil {
					return true, err
				}
				view := tx.view.(*sqlstore.View)
				msg := placed(key)
				msg.Scope = "alice"
				if _, err := view.Enqueue(ctx, msg); err != nil {
					return true, err
				}
				if err := claim.CompleteIn(ctx, view, []byte("placed")); err != nil {
					return true, err
				}
				if !commit {
					return true, tx.rollback(ctx)
				}
				return true, tx.commit(ctx)
			}
			if _, err := place("o-1", false); err != nil {
				t.Fatal(err)
			}
			if ids := pendingIDs(t, k.b, s); len(ids) != 0 || countOrders(t, k.b, orders) != 0 {
				t.Fatalf("after rollback: outbox %v, %d orders; want none", ids, countOrders(t, k.b, orders))
			}
			if _, err := place("o-1", true); err != nil {
				t.Fatal(err)
			}
			want := sqlstore.MessageID("alice", "o-1", "order.placed")
			if ids := pendingIDs(t, k.b, s); len(ids) != 1 || ids[0] != want || countOrders(t, k.b, orders) != 1 {
				t.Fatalf("after commit: outbox %v, %d orders; want [%s] and 1", ids, countOrders(t, k.b, orders), want)
			}

			var ran atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for range 16 {
				wg.Go(func() {
					r, err := place("o-2", true)
					if r && err == nil {
						ran.Add(1)
					}
					if err != nil && !errors.Is(err, idemkit.ErrInProgress) {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if ran.Load() != 1 || len(pendingIDs(t, k.b, s)) != 2 || countOrders(t, k.b, orders) != 2 {
				t.Fatalf("%d callers committed, outbox %d rows, %d orders; want 1, 2, 2", ran.Load(), len(pendingIDs(t, k.b, s)), countOrders(t, k.b, orders))
			}
		})
	}
}
