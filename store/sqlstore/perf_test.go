package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// recordConn records the statements run on it.
type recordConn struct {
	sqlstore.Conn
	queries []string
}

func (c *recordConn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	c.queries = append(c.queries, query)
	return c.Conn.Query(ctx, query, args...)
}

// claimQuery returns the statement s's own SetNX runs for a new key.
func claimQuery(t *testing.T, s *sqlstore.Store) string {
	t.Helper()
	var rec *recordConn
	sqlstore.WrapOwnConn(s, func(c sqlstore.Conn) sqlstore.Conn {
		rec = &recordConn{Conn: c}
		return rec
	})
	if set, _, err := s.SetNX(t.Context(), "new-"+randHex(4), []byte("v"), time.Minute); err != nil || !set {
		t.Fatalf("SetNX = %v, %v", set, err)
	}
	if len(rec.queries) != 1 {
		t.Fatalf("SetNX ran %d queries, want 1", len(rec.queries))
	}
	return rec.queries[0]
}

// TestAsyncClaims checks that WithAsyncClaims turns synchronous_commit off
// for the claim's own transaction only: the Store's claim statement does
// (also once PostgreSQL plans it generically), the session keeps its
// setting after it, and claims through a View leave the caller's
// transaction alone.
func TestAsyncClaims(t *testing.T) {
	if _, err := sqlstore.New(my.db, sqlstore.MySQL, sqlstore.WithAsyncClaims()); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("New(MySQL, WithAsyncClaims()) = %v; want store.ErrInvalid", err)
	}
	ctx := t.Context()
	s := newStore(t, pg, sqlstore.WithAsyncClaims())
	async, sync := claimQuery(t, s), claimQuery(t, newStore(t, pg))
	if async == sync {
		t.Fatal("WithAsyncClaims: the Store claims with the usual statement")
	}
	conn, err := pg.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	setting := func(q sqlstore.Querier) string {
		t.Helper()
		rows, err := q.QueryContext(ctx, "SELECT current_setting('synchronous_commit')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var v string
		if !rows.Next() || rows.Scan(&v) != nil {
			t.Fatalf("reading synchronous_commit: %v", rows.Err())
		}
		return v
	}
	claim := func(q sqlstore.Querier, query string) {
		t.Helper()
		rows, err := q.QueryContext(ctx, query, []byte("k-"+randHex(6)), []byte("v"), int64(60000))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var set bool
		var v []byte
		var ttl int64
		if !rows.Next() || rows.Scan(&set, &v, &ttl) != nil || !set {
			t.Fatalf("claim statement did not claim: %v", rows.Err())
		}
	}
	if got := setting(conn); got != "on" {
		t.Fatalf("the test server's synchronous_commit is %q; want on", got)
	}
	for i := range 8 { // pgx prepares and reuses it: generic plans after 5 runs
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		claim(tx, async)
		if got := setting(tx); got != "off" {
			t.Fatalf("run %d: synchronous_commit = %q after the async claim in its transaction; want off", i, got)
		}
		tx.Rollback()
		claim(conn, async) // autocommit, as the Store runs it
		if got := setting(conn); got != "on" {
			t.Fatalf("run %d: synchronous_commit = %q on the session after an autocommit async claim; want on", i, got)
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if set, _, err := s.Tx(tx).SetNX(ctx, "in-tx", []byte("v"), time.Minute); err != nil || !set {
		t.Fatalf("View SetNX = %v, %v", set, err)
	}
	if got := setting(tx); got != "on" {
		t.Fatalf("synchronous_commit = %q after a View's claim in the caller's transaction; want on", got)
	}
}

// TestTxPreparedStatements checks that a View on a transaction of the
// Store's pool runs the Store's prepared statements, on MySQL where a
// statement text with arguments would otherwise be prepared again each
// time, and that a pool of one connection does not deadlock when the
// statement is not prepared yet.
func TestTxPreparedStatements(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	db, err := sql.Open(my.driver, my.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	s, err := sqlstore.New(db, sqlstore.MySQL, sqlstore.WithTable(freshTable(t, my)), sqlstore.WithoutSweeper())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prepares := func(tx *sql.Tx) int64 {
		t.Helper()
		var name string
		var n int64
		if err := tx.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// In round 0 the statements are not prepared yet: the View runs their
	// texts while the pool's only connection is the transaction's. Once
	// the Store prepared them in the background, the View prepares none.
	for round := 0; ; round++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, key := s.Tx(tx), "order-"+randHex(4)
		before := prepares(tx)
		if set, _, err := v.SetNX(ctx, key, []byte("claim"), time.Minute); err != nil || !set {
			t.Fatalf("round %d: View SetNX = %v, %v", round, set, err)
		}
		if ok, err := v.CompareAndSwap(ctx, key, []byte("claim"), []byte("done"), time.Hour); err != nil || !ok {
			t.Fatalf("round %d: View CompareAndSwap = %v, %v", round, ok, err)
		}
		n := prepares(tx) - before
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if e, err := s.Get(ctx, key); err != nil || string(e.Value) != "done" {
			t.Fatalf("round %d: Get = %q, %v; want done", round, e.Value, err)
		}
		switch {
		case round > 0 && n == 0:
			return
		case round == 50:
			t.Fatalf("round %d: the View prepared %d statements; want 0 (the Store's, prepared once)", round, n)
		}
		time.Sleep(20 * time.Millisecond) // let the background preparation take the connection
	}
}

// TestTxOtherPool runs a View on a transaction of another *sql.DB than
// the Store's: the Store's prepared statements do not apply there, and the
// View runs the statement texts.
func TestTxOtherPool(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t, be)
			// Prepare the Store's statements on its own pool.
			mustSet(t, s, "warm", []byte("a"), time.Minute)
			if ok, err := s.CompareAndSwap(ctx, "warm", []byte("a"), []byte("b"), time.Minute); err != nil || !ok {
				t.Fatalf("CompareAndSwap = %v, %v", ok, err)
			}
			other, err := sql.Open(be.driver, be.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			for i := range 3 {
				tx, err := other.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				v, key := s.Tx(tx), "order-"+randHex(4)
				if set, _, err := v.SetNX(ctx, key, []byte("claim"), time.Minute); err != nil || !set {
					t.Fatalf("%d: View SetNX = %v, %v", i, set, err)
				}
				if ok, err := v.CompareAndSwap(ctx, key, []byte("claim"), []byte("done"), time.Hour); err != nil || !ok {
					t.Fatalf("%d: View CompareAndSwap = %v, %v", i, ok, err)
				}
				if e, err := v.Get(ctx, key); err != nil || string(e.Value) != "done" {
					t.Fatalf("%d: View Get = %q, %v", i, e.Value, err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if e, err := s.Get(ctx, key); err != nil || string(e.Value) != "done" {
					t.Fatalf("%d: Get = %q, %v; want done", i, e.Value, err)
				}
			}
		})
	}
}
