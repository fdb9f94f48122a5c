package sqlstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// roundTrips counts what a pgx connection sends: each query and each
// batch is one round trip.
type roundTrips struct{ n atomic.Int32 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// tracedConn returns a pgx connection to the test database whose round
// trips rt counts; the test closes it.
func tracedConn(t *testing.T) (*pgx.Conn, *roundTrips) {
	t.Helper()
	cfg, err := pgx.ParseConfig(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	cfg.Tracer = rt
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, rt
}

// TestPgxBeginSendsBEGINWithTheClaim: a transaction begun with
// pgxstore.Begin sends BEGIN with its first statement, a claim, in one
// round trip: a claim and its commit take 2 round trips, against 3 with
// pgx's Begin, and later statements run in the transaction as usual. Both commit the claim; a Tx rolled back leaves nothing, and
// one that sent nothing commits and rolls back without a round trip.
func TestPgxBeginSendsBEGINWithTheClaim(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, pg)
	conn, rt := tracedConn(t)

	claim := func(q pgxstore.Querier, key string) {
		t.Helper()
		set, _, err := pgxstore.View(s, q).SetNX(ctx, key, []byte("claim"), time.Minute)
		if err != nil || !set {
			t.Fatalf("SetNX(%s) = %v, %v", key, set, err)
		}
	}
	rt.n.Store(0)
	eager, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claim(eager, "eager")
	if err := eager.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	eagerTrips := rt.n.Load()

	rt.n.Store(0)
	lazy := pgxstore.Begin(conn, pgx.TxOptions{})
	if lazy.Tx() != nil || rt.n.Load() != 0 {
		t.Fatal("pgxstore.Begin sent something before the first statement")
	}
	claim(lazy, "lazy")
	if lazy.Tx() == nil {
		t.Fatal("the first statement began no transaction")
	}
	firstTrips := rt.n.Load()
	claim(lazy, "lazy-2") // the transaction serves further statements
	if err := lazy.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if eagerTrips != 3 || firstTrips != 1 || rt.n.Load() != 3 {
		t.Fatalf("round trips: pgx Begin, claim, commit %d (want 3); pgxstore.Begin and claim %d (want 1), then a claim and commit %d in all (want 3)",
			eagerTrips, firstTrips, rt.n.Load())
	}
	for _, k := range []string{"eager", "lazy", "lazy-2"} {
		if _, err := s.Get(ctx, k); err != nil {
			t.Fatalf("%s was not committed: %v", k, err)
		}
	}

	rolled := pgxstore.Begin(conn, pgx.TxOptions{})
	claim(rolled, "rolled")
	if err := rolled.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "rolled"); err == nil {
		t.Fatal("a rolled-back claim was kept")
	}
	rt.n.Store(0)
	empty := pgxstore.Begin(conn, pgx.TxOptions{})
	if err := empty.Commit(ctx); err != nil || empty.Rollback(ctx) != nil || rt.n.Load() != 0 {
		t.Fatalf("an empty Tx sent %d round trips (commit err %v)", rt.n.Load(), err)
	}
}
