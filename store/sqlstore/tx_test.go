package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// bizTx is a caller's business transaction, in one of the APIs a View
// runs on: database/sql or native pgx.
type bizTx struct {
	view     store.Store
	insert   func(ctx context.Context, order string) error
	commit   func(ctx context.Context) error
	rollback func(ctx context.Context) error
}

// txKind begins business transactions on one backend.
type txKind struct {
	name  string
	b     *backend
	begin func(t *testing.T, s *sqlstore.Store, orders string) bizTx
}

func txKinds(t *testing.T) []txKind {
	kinds := []txKind{{name: "postgres", b: pg, begin: beginSQL}, {name: "mysql", b: my, begin: beginSQL}}
	pool, err := pgxpool.New(t.Context(), pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	kinds = append(kinds, txKind{name: "pgx", b: pg, begin: func(t *testing.T, s *sqlstore.Store, orders string) bizTx {
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(context.Background()) })
		return bizTx{
			view: pgxstore.View(s, tx),
			insert: func(ctx context.Context, order string) error {
				_, err := tx.Exec(ctx, "INSERT INTO "+orders+" (id) VALUES ($1)", order)
				return err
			},
			commit:   tx.Commit,
			rollback: tx.Rollback,
		}
	}})
	return kinds
}

func beginSQL(t *testing.T, s *sqlstore.Store, orders string) bizTx {
	b := pg
	if s.Dialect() == sqlstore.MySQL {
		b = my
	}
	tx, err := b.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	placeholder := "$1"
	if b == my {
		placeholder = "?"
	}
	return bizTx{
		view: s.Tx(tx),
		insert: func(ctx context.Context, order string) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO "+orders+" (id) VALUES ("+placeholder+")", order)
			return err
		},
		commit:   func(context.Context) error { return tx.Commit() },
		rollback: func(context.Context) error { return tx.Rollback() },
	}
}

// ordersTable creates a business table of order ids on b.
func ordersTable(t *testing.T, b *backend) string {
	name := fmt.Sprintf("orders%d", tables.Add(1))
	if _, err := b.db.ExecContext(t.Context(), "CREATE TABLE "+name+" (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name) })
	return name
}

func countOrders(t *testing.T, b *backend, orders string) int {
	var n int
	if err := b.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+orders).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTxCompletion completes a claim made outside the business
// transaction with a CompareAndSwap inside it: rolled back, the record is
// still the claim and no order exists; committed, both are there; and a
// claim whose owner changed cannot be completed.
func TestTxCompletion(t *testing.T) {
	claim, done, ttl := []byte("claim:owner-1"), []byte("done:owner-1"), time.Minute
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, k.b), ordersTable(t, k.b)
			mustSet(t, s, "order-1", claim, ttl)

			tx := k.begin(t, s, orders)
			mustInsertAndSwap(t, tx, "order-1", claim, done)
			if err := tx.rollback(ctx); err != nil {
				t.Fatal(err)
			}
			mustHold(t, s, "order-1", claim)
			if n := countOrders(t, k.b, orders); n != 0 {
				t.Fatalf("%d orders after rollback, want 0", n)
			}

			tx = k.begin(t, s, orders)
			mustInsertAndSwap(t, tx, "order-1", claim, done)
			if err := tx.commit(ctx); err != nil {
				t.Fatal(err)
			}
			mustHold(t, s, "order-1", done)
			if n := countOrders(t, k.b, orders); n != 1 {
				t.Fatalf("%d orders after commit, want 1", n)
			}

			// A lease taken over by another owner: the stale owner's
			// completion reports false, and the caller rolls back.
			mustSet(t, s, "order-2", []byte("claim:owner-2"), ttl)
			tx = k.begin(t, s, orders)
			ok, err := tx.view.CompareAndSwap(ctx, "order-2", claim, done, ttl)
			if err != nil || ok {
				t.Fatalf("CompareAndSwap by a stale owner = %v, %v; want false, nil", ok, err)
			}
		})
	}
}

func mustInsertAndSwap(t *testing.T, tx bizTx, key string, claim, done []byte) {
	t.Helper()
	if err := tx.insert(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	ok, err := tx.view.CompareAndSwap(t.Context(), key, claim, done, time.Hour)
	if err != nil || !ok {
		t.Fatalf("CompareAndSwap in the transaction = %v, %v; want true, nil", ok, err)
	}
}

func mustSet(t testing.TB, s store.Store, key string, value []byte, ttl time.Duration) {
	t.Helper()
	set, _, err := s.SetNX(t.Context(), key, value, ttl)
	if err != nil || !set {
		t.Fatalf("SetNX(%q) = %v, %v; want true, nil", key, set, err)
	}
}

func mustHold(t testing.TB, s store.Store, key string, want []byte) {
	t.Helper()
	e, err := s.Get(t.Context(), key)
	if err != nil || string(e.Value) != string(want) {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, e.Value, err, want)
	}
}

// TestTxAllInside claims, writes and completes in one transaction while a
// duplicate claims the same key outside it: the duplicate waits on the
// key's row (seen waiting by the server), then replays the committed
// record; after a rollback, the duplicate claims the key itself.
func TestTxAllInside(t *testing.T) {
	for _, k := range txKinds(t) {
		for _, commit := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/commit=%v", k.name, commit), func(t *testing.T) {
				ctx := t.Context()
				s, orders := newStore(t, k.b), ordersTable(t, k.b)
				tx := k.begin(t, s, orders)
				set, _, err := tx.view.SetNX(ctx, "order-1", []byte("claim"), time.Minute)
				if err != nil || !set {
					t.Fatalf("SetNX in the transaction = %v, %v", set, err)
				}
				mustInsertAndSwap(t, tx, "order-1", []byte("claim"), []byte("done"))

				dup := make(chan result, 1)
				go func() {
					set, e, err := s.SetNX(ctx, "order-1", []byte("duplicate"), time.Minute)
					dup <- result{set, e, err}
				}()
				if r, early := waitForLockWait(t, k.b, dup); early {
					t.Fatalf("the duplicate SetNX returned %v, %q, %v before the transaction ended", r.set, r.e.Value, r.err)
				}
				end := tx.rollback
				if commit {
					end = tx.commit
				}
				if err := end(ctx); err != nil {
					t.Fatal(err)
				}
				r := <-dup
				switch {
				case r.err != nil:
					t.Fatalf("duplicate SetNX: %v", r.err)
				case commit && (r.set || string(r.e.Value) != "done"):
					t.Fatalf("duplicate SetNX after commit = %v, %q; want false, the completed record", r.set, r.e.Value)
				case !commit && !r.set:
					t.Fatalf("duplicate SetNX after rollback = false, %q; want it to claim the key", r.e.Value)
				}
			})
		}
	}
}

// result is what a SetNX returned.
type result struct {
	set bool
	e   store.Entry
	err error
}

// waitForLockWait waits until a session of b's test database waits on a
// row lock, or dup delivers a result (early).
func waitForLockWait(t *testing.T, b *backend, dup <-chan result) (r result, early bool) {
	t.Helper()
	query := `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
	if b == my {
		// A write of another session of this database, in flight while
		// the business transaction is open, waits on the row: it cannot
		// end before the transaction. (MariaDB does not always list an
		// autocommit statement's lock wait in information_schema.innodb_trx.)
		query = `SELECT COUNT(*) FROM information_schema.processlist
WHERE db = DATABASE() AND id <> CONNECTION_ID() AND command <> 'Sleep'
AND (info LIKE 'INSERT%' OR info LIKE 'UPDATE%')`
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		var n int
		err := b.db.QueryRowContext(ctx, query).Scan(&n)
		switch {
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			t.Fatalf("waiting for the duplicate to wait on the row: %v", err)
		case n > 0:
			return result{}, false
		}
		select {
		case r := <-dup:
			return r, true
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Compile-time check that pgx's transaction satisfies pgxstore.Querier.
var _ pgxstore.Querier = pgx.Tx(nil)

// TestDBIsTheStoresPool: business transactions begun on DB complete their
// records through Tx on the same database.
func TestDBIsTheStoresPool(t *testing.T) {
	for _, b := range backends() {
		if s := newStore(t, b); s.DB() != b.db {
			t.Errorf("%s: DB() is not the pool given to New", s.Dialect())
		}
	}
}
