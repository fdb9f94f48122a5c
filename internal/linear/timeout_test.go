package linear_test

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// Server-side timeouts of the sessions of runTimeoutCase: short enough
// that a statement waiting on the locked table is cancelled by the server,
// not by the client's deadline (linear.Workload.OpTimeout, 500ms).
const (
	pgStatementTimeout = "60"   // ms, statement_timeout
	pgLockTimeout      = "30"   // ms, lock_timeout
	myStatementTime    = "0.06" // s, max_statement_time
	myLockWait         = "1"    // s, innodb_lock_wait_timeout (its least)
)

// timeoutDB opens a pool to c's database, without the proxy, whose every
// session has server-side timeouts: statement_timeout and lock_timeout on
// PostgreSQL, max_statement_time and innodb_lock_wait_timeout on MariaDB.
func timeoutDB(t *testing.T, c *sqlCase) *sql.DB {
	var db *sql.DB
	var err error
	switch c.dialect {
	case sqlstore.Postgres:
		u, perr := url.Parse(c.directDSN)
		if perr != nil {
			t.Fatal(perr)
		}
		q := u.Query()
		q.Set("statement_timeout", pgStatementTimeout)
		q.Set("lock_timeout", pgLockTimeout)
		u.RawQuery = q.Encode()
		db, err = sql.Open("pgx", u.String())
	default:
		cfg, perr := mysql.ParseDSN(c.directDSN)
		if perr != nil {
			t.Fatal(perr)
		}
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["max_statement_time"] = myStatementTime
		cfg.Params["innodb_lock_wait_timeout"] = myLockWait
		db, err = sql.Open("mysql", cfg.FormatDSN())
	}
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// lockTable is the fault that makes the server time statements out: a
// session of its own locks the store's table (LOCK TABLE ... IN ACCESS
// EXCLUSIVE MODE in a transaction on PostgreSQL, LOCK TABLES ... WRITE on
// MariaDB) until healed, so that the clients' statements wait on it until
// their server-side timeout cancels them.
func lockTable(c *sqlCase, db *sql.DB) fault {
	var conn *sql.Conn
	return fault{
		name: "statement-timeout",
		inject: func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			if conn, err = db.Conn(ctx); err != nil {
				t.Fatalf("locking the table: %v", err)
			}
			// The lock's own session must not be timed out.
			stmts := []string{"SET statement_timeout = 0", "SET lock_timeout = 0", "BEGIN", "LOCK TABLE idem IN ACCESS EXCLUSIVE MODE"}
			if c.dialect != sqlstore.Postgres {
				stmts = []string{"SET SESSION max_statement_time = 0", "LOCK TABLES idem WRITE"}
			}
			for _, st := range stmts {
				if _, err := conn.ExecContext(ctx, st); err != nil {
					t.Fatalf("locking the table: %s: %v", st, err)
				}
			}
		},
		heal: func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st := "ROLLBACK"
			if c.dialect != sqlstore.Postgres {
				st = "UNLOCK TABLES"
			}
			if _, err := conn.ExecContext(ctx, st); err != nil {
				t.Errorf("unlocking the table: %v", err)
			}
			_ = conn.Close()
		},
	}
}

// runTimeoutCase records histories of the store over sessions with
// server-side statement timeouts while the table is locked now and then:
// the statements the server cancels fail, and are recorded as unknown
// outcomes. The case fails unless some were.
func runTimeoutCase(t *testing.T, c *sqlCase) {
	db := timeoutDB(t, c)
	s, err := sqlstore.New(db, c.dialect, sqlstore.WithTable("idem"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var stats linear.Stats
	runCaseStats(t, c.name, s, lockTable(c, db), &stats, 1)
	if stats.Unknown == 0 {
		t.Errorf("no statement was cancelled by its server-side timeout: the case measured nothing")
	}
}
