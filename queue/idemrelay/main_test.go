package idemrelay_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idemkit/idemkit/store/sqlstore"
)

// Environment variables that point the tests at other servers, as in
// store/sqlstore's tests: each names an administrative DSN through which
// the tests create a database of their own, dropped at the end.
const (
	envPostgres = "IDEMKIT_TEST_POSTGRES_DSN" // postgres://user@host:port/db?sslmode=disable
	envMySQL    = "IDEMKIT_TEST_MYSQL_DSN"    // user@tcp(host:port)/db
)

// backend is one test database.
type backend struct {
	name    string
	driver  string
	dialect sqlstore.Dialect
	dsn     string
	db      *sql.DB
}

var pg, my *backend

func backends() []*backend { return []*backend{pg, my} }

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("idemrelay_test_%d_%s", os.Getpid(), randHex(4))
	var err error
	var drop func()
	if pg, drop, err = setupPostgres(ctx, name); err != nil {
		fmt.Fprintln(os.Stderr, "idemrelay tests: PostgreSQL:", err, "(./scripts/test.sh starts it; or set", envPostgres+")")
		return 1
	}
	defer drop()
	if my, drop, err = setupMySQL(ctx, name); err != nil {
		fmt.Fprintln(os.Stderr, "idemrelay tests: MySQL/MariaDB:", err, "(./scripts/test.sh starts it; or set", envMySQL+")")
		return 1
	}
	defer drop()
	return m.Run()
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func setupPostgres(ctx context.Context, name string) (*backend, func(), error) {
	admin := envOr(envPostgres, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	u, err := url.Parse(admin)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a URL", envPostgres)
	}
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		return nil, nil, err
	}
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		adb.Close()
		return nil, nil, err
	}
	u.Path = "/" + name
	b := &backend{name: "postgres", driver: "pgx", dialect: sqlstore.Postgres, dsn: u.String()}
	b.db, _ = sql.Open("pgx", b.dsn)
	return b, func() {
		b.db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "idemrelay tests: dropping", name+":", err)
		}
		adb.Close()
	}, nil
}

func setupMySQL(ctx context.Context, name string) (*backend, func(), error) {
	cfg, err := mysql.ParseDSN(envOr(envMySQL, "root@tcp(127.0.0.1:3306)/"))
	if err != nil {
		return nil, nil, fmt.Errorf("%s does not parse", envMySQL)
	}
	adb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		adb.Close()
		return nil, nil, err
	}
	cfg.DBName = name
	b := &backend{name: "mysql", driver: "mysql", dialect: sqlstore.MySQL, dsn: cfg.FormatDSN()}
	b.db, _ = sql.Open("mysql", b.dsn)
	return b, func() {
		b.db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			fmt.Fprintln(os.Stderr, "idemrelay tests: dropping", name+":", err)
		}
		adb.Close()
	}, nil
}

var tables atomic.Int64

// newOutbox returns a Store over fresh record and outbox tables of b,
// closed and dropped when t ends.
func newOutbox(t testing.TB, b *backend) *sqlstore.Store {
	t.Helper()
	suffix := fmt.Sprintf("%d_%s", tables.Add(1), strings.ToLower(randHex(2)))
	return openOutbox(t, b, "rec"+suffix, "ob"+suffix, true)
}

// openOutbox returns a Store over the named tables of b, creating them
// when create is set (and then dropping them when t ends).
func openOutbox(t testing.TB, b *backend, records, outbox string, create bool) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.New(b.db, b.dialect, sqlstore.WithTable(records), sqlstore.WithOutboxTable(outbox), sqlstore.WithoutSweeper())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !create {
		return s
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOutbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, table := range []string{records, outbox} {
			if _, err := b.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
				t.Errorf("dropping %s: %v", table, err)
			}
		}
	})
	return s
}

// event is the message the tests enqueue for order i.
func event(subject string, i int) sqlstore.Message {
	return sqlstore.Message{
		Scope: "user-1", Key: fmt.Sprint("order-", i), Event: "order.placed", Subject: subject,
		Headers: map[string]string{"Order": fmt.Sprint(i)},
		Payload: fmt.Appendf(nil, `{"order":%d}`, i),
	}
}

// enqueue enqueues the events of orders [from, to) in transactions of
// up to 10 each, committing them, and rolls back one more transaction of
// the rolled-back ids (orders from 1,000,000 up) after each, whose events
// must never be published. It returns the ids committed.
func enqueue(t testing.TB, b *backend, s *sqlstore.Store, subject string, from, to int) map[string]bool {
	t.Helper()
	ctx := context.Background()
	ids := map[string]bool{}
	for i := from; i < to; i += 10 {
		for _, commit := range []bool{true, false} {
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for j := i; j < min(i+10, to); j++ {
				n := j
				if !commit {
					n += 1_000_000
				}
				id, err := s.Tx(tx).Enqueue(ctx, event(subject, n))
				if err != nil {
					tx.Rollback()
					t.Fatal(err)
				}
				if commit {
					ids[id] = true
				}
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}

// pending counts the rows of s's outbox.
func pending(t testing.TB, s *sqlstore.Store) int64 {
	t.Helper()
	st, err := s.OutboxState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending
}
