package sqlstore_test

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

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/storetest/fencetest"
)

// Environment variables that point the tests at other servers. Each names
// an administrative DSN; the tests create a fresh database through it and
// drop it at the end.
const (
	envPostgres = "IDEMKIT_TEST_POSTGRES_DSN" // URL form: postgres://user@host:port/db?sslmode=disable
	envMySQL    = "IDEMKIT_TEST_MYSQL_DSN"    // go-sql-driver form: user@tcp(host:port)/db
)

const (
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultMySQL    = "root@tcp(127.0.0.1:3306)/"
)

// envChild marks a child process of the cross-process race; the child
// gets the test database's DSN and table, and creates no database.
const (
	envChild      = "SQLSTORE_TEST_CHILD"
	envChildTable = "SQLSTORE_TEST_TABLE"
)

// backend is one test database: its DSN, pool and dialect.
type backend struct {
	name    string // "postgres" or "mysql"
	driver  string // database/sql driver name
	dialect sqlstore.Dialect
	dsn     string
	db      *sql.DB
}

// The test databases, set up by TestMain.
var pg, my *backend

func backends() []*backend { return []*backend{pg, my} }

func TestMain(m *testing.M) {
	fencetest.Child(store.Open) // a child of RunProcess: it exits here
	if os.Getenv(envChild) != "" {
		os.Exit(m.Run())
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("idemkit_test_%d_%s", os.Getpid(), randHex(4))
	var drops []func()
	defer func() {
		for _, drop := range drops {
			drop()
		}
	}()
	var err error
	var drop func()
	if pg, drop, err = setupPostgres(ctx, name); err != nil {
		fmt.Fprintln(os.Stderr, "sqlstore tests: PostgreSQL:", err, "(./scripts/test.sh starts it; or set", envPostgres+")")
		return 1
	}
	drops = append(drops, drop)
	if my, drop, err = setupMySQL(ctx, name); err != nil {
		fmt.Fprintln(os.Stderr, "sqlstore tests: MySQL/MariaDB:", err, "(./scripts/test.sh starts it; or set", envMySQL+")")
		return 1
	}
	drops = append(drops, drop)
	return m.Run()
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func setupPostgres(ctx context.Context, name string) (*backend, func(), error) {
	admin := envOr(envPostgres, defaultPostgres)
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
			fmt.Fprintln(os.Stderr, "sqlstore tests: dropping", name+":", err)
		}
		adb.Close()
	}, nil
}

func setupMySQL(ctx context.Context, name string) (*backend, func(), error) {
	cfg, err := mysql.ParseDSN(envOr(envMySQL, defaultMySQL))
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
	if err := raisePacketLimit(ctx, adb); err != nil {
		fmt.Fprintln(os.Stderr, "sqlstore tests: cannot raise max_allowed_packet; the largest values will fail:", err)
	}
	cfg.DBName = name
	b := &backend{name: "mysql", driver: "mysql", dialect: sqlstore.MySQL, dsn: cfg.FormatDSN()}
	b.db, _ = sql.Open("mysql", b.dsn)
	return b, func() {
		b.db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			fmt.Fprintln(os.Stderr, "sqlstore tests: dropping", name+":", err)
		}
		adb.Close()
	}, nil
}

// minPacket is the max_allowed_packet a server needs to hold a value of
// store.MaxValueLen bytes in a statement or a row, with room to spare.
const minPacket = 64 << 20

// raisePacketLimit raises the server's max_allowed_packet to minPacket if
// it is lower (MariaDB's default is 16MiB, MySQL 8's 64MiB), for the
// connections opened after it; see the package documentation.
func raisePacketLimit(ctx context.Context, db *sql.DB) error {
	var cur int64
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.max_allowed_packet").Scan(&cur); err != nil {
		return err
	}
	if cur >= minPacket {
		return nil
	}
	_, err := db.ExecContext(ctx, fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", minPacket))
	return err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// tables numbers the tables handed out by freshTable.
var tables atomic.Int64

// freshTable creates an empty table on b and drops it when t ends.
func freshTable(t testing.TB, b *backend) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", tables.Add(1), strings.ToLower(randHex(2)))
	stmts, err := sqlstore.Schema(b.dialect, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stmts {
		if _, err := b.db.ExecContext(context.Background(), st); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	t.Cleanup(func() {
		if _, err := b.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return name
}

// newStore returns a Store over a fresh table of b, closed when t ends.
func newStore(t testing.TB, b *backend, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	table := freshTable(t, b)
	s, err := sqlstore.New(b.db, b.dialect, append([]sqlstore.Option{sqlstore.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
