package sqlstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// TestPgxStepAddsNoRoundTrip: a step whose transaction writes an order
// and records its recovery point (idemkit.RecordStepIn) in it, begun with
// pgxstore.Begin, costs the business connection the round trips of the
// same transaction without idemkit begun with pgx's Begin: 3 (BEGIN with
// the write, the record, COMMIT; against BEGIN, the write, COMMIT). The
// record is the one statement it adds, and the BEGIN that travels with
// the first statement pays for it; with pgx's Begin it would cost 4.
// The engine's own store calls (the operation's claim and completion) go
// through the store's pool and are not counted here.
func TestPgxStepAddsNoRoundTrip(t *testing.T) {
	ctx := t.Context()
	s, orders := newStore(t, pg), ordersTable(t, pg)
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	conn, rt := tracedConn(t)
	insert := "INSERT INTO " + orders + " (id) VALUES ($1)"

	// The transaction without idemkit.
	rt.n.Store(0)
	plain, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Exec(ctx, insert, "plain"); err != nil {
		t.Fatal(err)
	}
	if err := plain.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	plainTrips := rt.n.Load()

	// The same transaction as a step, begun with pgx's Begin, then with
	// pgxstore.Begin.
	stepTrips := func(key string, begin func() (pgxstore.Querier, func(context.Context) error)) int32 {
		t.Helper()
		var trips int32
		_, err := e.Do(ctx, key, "", func(ctx context.Context) ([]byte, error) {
			return idemkit.Step(ctx, "place order", func(ctx context.Context) ([]byte, error) {
				rt.n.Store(0)
				q, commit := begin()
				if _, err := q.Exec(ctx, insert, key); err != nil {
					return nil, err
				}
				if err := idemkit.RecordStepIn(ctx, pgxstore.View(s, q), []byte("order "+key)); err != nil {
					return nil, err
				}
				err := commit(ctx)
				trips = rt.n.Load()
				return nil, err
			})
		})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return trips
	}
	eager := stepTrips("eager", func() (pgxstore.Querier, func(context.Context) error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tx, tx.Commit
	})
	lazy := stepTrips("lazy", func() (pgxstore.Querier, func(context.Context) error) {
		tx := pgxstore.Begin(conn, pgx.TxOptions{})
		return tx, tx.Commit
	})
	if plainTrips != 3 || eager != 4 || lazy != plainTrips {
		t.Fatalf("round trips: the transaction without idemkit %d (want 3); as a step with pgx's Begin %d (want 4), with pgxstore.Begin %d (want %d)",
			plainTrips, eager, lazy, plainTrips)
	}
	if n := countOrders(t, pg, orders); n != 3 {
		t.Fatalf("%d orders, want 3", n)
	}
	for _, key := range []string{"eager", "lazy"} {
		r, err := e.Do(ctx, key, "", func(context.Context) ([]byte, error) { t.Fatal("ran again"); return nil, nil })
		if err != nil || string(r.Value) != "order "+key {
			t.Fatalf("%s replayed %q, %v; want the step's recorded result", key, r.Value, err)
		}
	}
}
