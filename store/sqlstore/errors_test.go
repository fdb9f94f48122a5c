package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// secretKey is a key whose bytes must never reach an error text.
const secretKey = "user:alice:card=4111111111111111"

// TestUnreachable checks that a database that does not answer gives
// errors wrapping store.ErrUnavailable that do not show the key.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct{ driver, dsn string }{
		{"pgx", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5"},
		{"mysql", "root@tcp(127.0.0.1:1)/test?timeout=5s"},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			db, err := sql.Open(tc.driver, tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			d := sqlstore.Postgres
			if tc.driver == "mysql" {
				d = sqlstore.MySQL
			}
			s, err := sqlstore.New(db, d, sqlstore.WithoutSweeper())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := t.Context()
			_, _, err1 := s.SetNX(ctx, secretKey, []byte("v"), time.Minute)
			_, err2 := s.Get(ctx, secretKey)
			_, err3 := s.CompareAndSwap(ctx, secretKey, []byte("v"), []byte("w"), time.Minute)
			_, err4 := s.CompareAndDelete(ctx, secretKey, []byte("v"))
			_, err5 := s.Consume(ctx, secretKey)
			for _, err := range []error{err1, err2, err3, err4, err5, s.Ping(ctx)} {
				checkUnavailable(t, err)
			}
		})
	}
}

func checkUnavailable(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("error %v, want one wrapping store.ErrUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "alice") {
		t.Errorf("error shows the key: %v", err)
	}
}

// TestLockTimeout holds a key's row in a transaction and runs a
// CompareAndSwap with a deadline: it fails with an error wrapping
// store.ErrUnavailable and context.DeadlineExceeded, and nothing changed.
func TestLockTimeout(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b)
			mustSet(t, s, secretKey, []byte("v"), time.Minute)
			tx, err := b.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if ok, err := s.Tx(tx).CompareAndSwap(t.Context(), secretKey, []byte("v"), []byte("tx"), time.Minute); err != nil || !ok {
				t.Fatalf("CompareAndSwap in the transaction = %v, %v", ok, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err = s.CompareAndSwap(ctx, secretKey, []byte("v"), []byte("w"), time.Minute)
			checkUnavailable(t, err)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want one wrapping context.DeadlineExceeded", err)
			}
			if b == pg {
				// pgx cancels the statement on the server, but its cancel
				// request travels apart from the statement: roll back only
				// once the server no longer shows it waiting, or the lock
				// could be released first and the statement run.
				waitNoLockWaiters(t, b)
			}
			tx.Rollback()
			if b == pg {
				// go-sql-driver only drops the connection, and MariaDB may
				// still run the waiting statement: nothing can be concluded
				// there, as ErrUnavailable says.
				mustHold(t, s, secretKey, []byte("v"))
			}
		})
	}
}

// TestInvalidOptions checks that New refuses bad arguments with
// store.ErrInvalid.
func TestInvalidOptions(t *testing.T) {
	for name, opts := range map[string][]sqlstore.Option{
		"table with a quote":  {sqlstore.WithTable(`x"; DROP TABLE y; --`)},
		"table with two dots": {sqlstore.WithTable("a.b.c")},
		"table of a digit":    {sqlstore.WithTable("1abc")},
		"empty table":         {sqlstore.WithTable("")},
		"zero sweep interval": {sqlstore.WithSweepInterval(0)},
		"sweep batch 0":       {sqlstore.WithSweepBatch(0)},
		"nil sweep hook":      {sqlstore.WithOnSweep(nil)},
		"nil option":          {nil},
	} {
		if s, err := sqlstore.New(pg.db, sqlstore.Postgres, opts...); !errors.Is(err, store.ErrInvalid) {
			if s != nil {
				s.Close()
			}
			t.Errorf("New with %s = %v, want an error wrapping store.ErrInvalid", name, err)
		}
	}
	if _, err := sqlstore.New(nil, sqlstore.Postgres); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("New(nil) = %v, want store.ErrInvalid", err)
	}
	if _, err := sqlstore.New(pg.db, sqlstore.Dialect{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("New with the zero Dialect = %v, want store.ErrInvalid", err)
	}
	s := newStore(t, pg)
	if _, err := s.Tx(nil).Get(t.Context(), "k"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Get on a View of a nil Querier = %v, want store.ErrInvalid", err)
	}
}

// waitNoLockWaiters waits until no session of b's database waits on a
// lock (PostgreSQL).
func waitNoLockWaiters(t *testing.T, b *backend) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := b.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a cancelled statement still waits on its lock after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
