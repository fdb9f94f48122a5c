package txcrash_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// The child process's environment.
const (
	envChild = "TXCRASH_CHILD" // the kill point the child stops at
	envPG    = "TXCRASH_PG"    // the test database's DSN
	envRedis = "TXCRASH_REDIS" // the redis-server address ("" for the SQL store)
	envKey   = "TXCRASH_KEY"   // the idempotency key of this round
)

// Kill points, in the order the work reaches them.
const (
	duringWork   = "during-work"   // claimed; the order is not written yet
	beforeCommit = "before-commit" // the order row is written, not committed
	afterCommit  = "after-commit"  // committed; the response is not sent
)

const lease = 300 * time.Millisecond

// TestMain runs the child's work when the test binary is started as a
// child by the crash test.
func TestMain(m *testing.M) {
	if point := os.Getenv(envChild); point != "" {
		if err := child(point); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// open builds the engine over the SQL store, or over Redis when addr is
// set, with the order table in PostgreSQL in both cases.
func open(dsn, addr string) (*idemkit.Engine, *sql.DB, *sqlstore.Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, nil, nil, err
	}
	sqls, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithoutSweeper())
	if err != nil {
		return nil, nil, nil, err
	}
	var st store.Store = sqls
	if addr != "" {
		if st, err = redisstore.New(redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})); err != nil {
			return nil, nil, nil, err
		}
	}
	e, err := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithLease(lease), idemkit.WithoutHeartbeat())
	return e, db, sqls, err
}

// placeOrder is the service's work for one request: claim the key, write
// the order and (with the SQL store) complete the record in the same
// transaction, commit, and (with Redis) complete the record afterwards.
// stop is called at each kill point.
func placeOrder(ctx context.Context, e *idemkit.Engine, db *sql.DB, sqls *sqlstore.Store, inSQL bool, key string, stop func(string)) (ran bool, err error) {
	claim, res, err := e.Begin(ctx, key, "order")
	if err != nil || claim == nil {
		return false, errors.Join(err, replayed(res))
	}
	defer claim.Release(ctx)
	stop(duringWork)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return true, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (idem_key) VALUES ($1)", key); err != nil {
		return true, fmt.Errorf("order insert: %w", err)
	}
	if inSQL {
		if err := claim.CompleteIn(ctx, sqls.Tx(tx), []byte("order for "+key)); err != nil {
			return true, err
		}
	}
	stop(beforeCommit)
	if err := tx.Commit(); err != nil {
		return true, err
	}
	stop(afterCommit)
	if !inSQL {
		return true, claim.Complete(ctx, []byte("order for "+key))
	}
	return true, nil
}

func replayed(res idemkit.Result) error {
	if res.Replayed {
		return nil
	}
	return errors.New("neither claimed nor replayed")
}

// child places one order and, at its kill point, tells the parent and
// waits to be killed.
func child(point string) error {
	e, db, sqls, err := open(os.Getenv(envPG), os.Getenv(envRedis))
	if err != nil {
		return err
	}
	_, err = placeOrder(context.Background(), e, db, sqls, os.Getenv(envRedis) == "", os.Getenv(envKey), func(at string) {
		if at == point {
			fmt.Println("AT", at)
			time.Sleep(time.Minute) // the parent kills us here
		}
	})
	return err
}

// TestCrashAtEachPoint kills a child at each point, 7 rounds per point and
// store, then retries the request once the lease has run out, and counts
// orders and re-runs.
func TestCrashAtEachPoint(t *testing.T) {
	dsn := testDatabase(t)
	srv := redistest.Start(t)
	points := []string{duringWork, beforeCommit, afterCommit}
	for _, backend := range []struct{ name, redis string }{{"postgres", ""}, {"redis", srv.Addr()}} {
		t.Run(backend.name, func(t *testing.T) {
			e, db, sqls, err := open(dsn, backend.redis)
			if err != nil {
				t.Fatal(err)
			}
			reran := map[string]int{}
			for round := range 21 {
				point := points[round%len(points)]
				key := fmt.Sprintf("%s-%d-%s", backend.name, round, point)
				crash(t, dsn, backend.redis, point, key)
				time.Sleep(lease + 100*time.Millisecond) // a crashed claim frees itself
				ran, err := placeOrder(t.Context(), e, db, sqls, backend.redis == "", key, func(string) {})
				var rows int
				if qerr := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM orders WHERE idem_key = $1", key).Scan(&rows); qerr != nil {
					t.Fatal(qerr)
				}
				if rows != 1 {
					t.Fatalf("%s: %d order rows after the retry, want 1 (retry: ran=%v, %v)", key, rows, ran, err)
				}
				committed := point == afterCommit
				switch {
				case !committed && (err != nil || !ran):
					t.Fatalf("%s: the retry after an uncommitted run must run once: ran=%v, %v", key, ran, err)
				case committed && ran:
					reran[point]++ // the record was not there: the unique index caught it
					if err == nil || !strings.Contains(err.Error(), "order insert") {
						t.Fatalf("%s: a re-run must hit the unique index, got %v", key, err)
					}
				case committed && err != nil:
					t.Fatalf("%s: the replay failed: %v", key, err)
				}
			}
			t.Logf("%s: 21 crashes (7 per point); the retry after a committed run re-ran the work %d of 7 times", backend.name, reran[afterCommit])
			if backend.redis == "" && reran[afterCommit] != 0 {
				t.Fatalf("with the record in the order's transaction a committed run must replay, never re-run")
			}
			if backend.redis != "" && reran[afterCommit] != 7 {
				t.Fatalf("with the record in Redis every after-commit crash re-runs the work; counted %d of 7", reran[afterCommit])
			}
		})
	}
}

// crash starts a child that stops at point and kills it there.
func crash(t *testing.T, dsn, addr, point, key string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+point, envPG+"="+dsn, envRedis+"="+addr, envKey+"="+key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	reached := make(chan bool, 1)
	go func() {
		for lines.Scan() {
			if lines.Text() == "AT "+point {
				reached <- true
				return
			}
		}
		reached <- false
	}()
	select {
	case ok := <-reached:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("%s: the child ended before %s", key, point)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the child did not reach %s", key, point)
	}
	_ = cmd.Process.Kill() // SIGKILL
	_ = cmd.Wait()
}

// testDatabase creates a database of its own with an orders table (a
// unique index on the idempotency key, the final guard) and the idemkit
// table, and drops it when the test ends.
func testDatabase(t *testing.T) string {
	admin := os.Getenv("IDEMKIT_TEST_POSTGRES_DSN")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adb.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idemkit_txcrash_" + hex.EncodeToString(b[:])
	if _, err := adb.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("PostgreSQL at %s: %v", store.Redact(admin), err)
	}
	t.Cleanup(func() {
		_, _ = adb.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, idem_key TEXT NOT NULL UNIQUE)"); err != nil {
		t.Fatal(err)
	}
	sqls, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithoutSweeper())
	if err != nil {
		t.Fatal(err)
	}
	if err := sqls.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	return u.String()
}
