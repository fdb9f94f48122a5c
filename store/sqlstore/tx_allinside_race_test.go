package sqlstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// allInside is one server and transaction setting of the all-inside mode:
// the isolation level of the business transactions, and the Store's
// options (MariaDB claims with RETURNING unless WithoutReturning, the path
// MySQL takes).
type allInside struct {
	name      string
	b         *backend
	iso       sql.IsolationLevel
	returning bool
}

// allInsideModes are the settings the package documentation allows.
func allInsideModes() []allInside {
	modes := []allInside{{"postgres/read-committed", pg, sql.LevelReadCommitted, true}}
	for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
		for _, ret := range []bool{true, false} {
			name := "mysql/" + strings.ReplaceAll(strings.ToLower(iso.String()), " ", "-")
			if !ret {
				name += "/without-returning"
			}
			modes = append(modes, allInside{name, my, iso, ret})
		}
	}
	return modes
}

func (m allInside) options() []sqlstore.Option {
	if m.returning || m.b != my {
		return nil
	}
	return []sqlstore.Option{sqlstore.WithoutReturning()}
}

// isDeadlock reports an error the server raised for a deadlock: MySQL's
// 1213, PostgreSQL's 40P01.
func isDeadlock(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "1213") || strings.Contains(err.Error(), "eadlock"))
}

// doInTx runs one all-inside Do of key in its own transaction at iso: the
// work writes the order and returns its result, and the transaction
// commits. It reports whether the work ran.
func doInTx(ctx context.Context, e *idemkit.Engine, s *sqlstore.Store, iso sql.IsolationLevel, orders, key string) (ran bool, err error) {
	tx, err := s.DB().BeginTx(ctx, &sql.TxOptions{Isolation: iso})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	inTx, err := e.OnStore(s.Tx(tx))
	if err != nil {
		return false, err
	}
	placeholder := "$1"
	if s.Dialect() == sqlstore.MySQL {
		placeholder = "?"
	}
	res, err := inTx.Do(ctx, key, "fp", func(ctx context.Context) ([]byte, error) {
		ran = true
		_, err := tx.ExecContext(ctx, "INSERT INTO "+orders+" (id) VALUES ("+placeholder+")", key)
		return []byte("order " + key), err
	})
	if err != nil {
		return false, err
	}
	if string(res.Value) != "order "+key || res.Replayed == ran {
		return false, fmt.Errorf("Do(%s) = %q, replayed %v, ran %v; want the order's result, replayed exactly when the work did not run", key, res.Value, res.Replayed, ran)
	}
	return ran, tx.Commit()
}

// TestTxAllInsideReplaysDoNotDeadlock completes a key all inside one
// transaction, then replays it from 3 goroutines × 100 transactions at
// once, as duplicates of a completed order do. Every replay must succeed:
// none may end as a deadlock victim, and the work never runs again.
func TestTxAllInsideReplaysDoNotDeadlock(t *testing.T) {
	const goroutines, replays = 3, 100
	for _, m := range allInsideModes() {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newStore(t, m.b, m.options()...), ordersTable(t, m.b)
			e, err := idemkit.New(s, idemkit.WithObserver(nil))
			if err != nil {
				t.Fatal(err)
			}
			if ran, err := doInTx(ctx, e, s, m.iso, orders, "order-1"); err != nil || !ran {
				t.Fatalf("first Do = ran %v, %v", ran, err)
			}
			var deadlocks, failures, runs atomic.Int32
			var first sync.Once
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range replays {
						ran, err := doInTx(ctx, e, s, m.iso, orders, "order-1")
						if ran {
							runs.Add(1)
						}
						if err != nil {
							failures.Add(1)
							if isDeadlock(err) {
								deadlocks.Add(1)
							}
							first.Do(func() { t.Logf("first failure: %v", err) })
						}
					}
				})
			}
			wg.Wait()
			if deadlocks.Load() != 0 || failures.Load() != 0 || runs.Load() != 0 {
				t.Errorf("%d of %d replays failed (%d deadlocks); the work ran %d more times; want 0, 0, 0",
					failures.Load(), goroutines*replays, deadlocks.Load(), runs.Load())
			}
			if n := countOrders(t, m.b, orders); n != 1 {
				t.Errorf("%d orders, want 1", n)
			}
		})
	}
}

// Shape of the cross-process all-inside race.
const (
	allInsideGoroutines = 6
	allInsideKeys       = 24
)

// TestTxAllInsideCrossProcessRace runs raceProcs copies of this test
// binary, each with allInsideGoroutines goroutines, which all run an
// all-inside Do of every one of allInsideKeys keys, twice: first while the
// keys are new (claims race), then once all are completed (replays race).
// Each child prints every run of the work and every failure. Every key
// must have exactly one effect (one order, one run), and no Do may fail,
// in particular as a deadlock victim.
func TestTxAllInsideCrossProcessRace(t *testing.T) {
	for _, m := range allInsideModes() {
		t.Run(m.name, func(t *testing.T) {
			s, orders := newStore(t, m.b, m.options()...), ordersTable(t, m.b)
			env := []string{envChildOrders + "=" + orders, envChildIso + "=" + strconv.Itoa(int(m.iso)), envChildReturning + "=" + strconv.FormatBool(m.returning)}
			lines := runChildren(t, m.b, s.Table(), "TestAllInsideChild", env, "RUN ", "FAIL ")
			runs := map[string]int{}
			var fails, deadlocks int
			for _, l := range lines {
				kind, rest, _ := strings.Cut(l, " ")
				switch kind {
				case "RUN":
					runs[rest]++
				case "FAIL":
					fails++
					if isDeadlock(errors.New(rest)) {
						deadlocks++
					}
					if fails == 1 {
						t.Logf("first failure: %s", rest)
					}
				}
			}
			if fails != 0 {
				t.Errorf("%d Do calls failed, %d of them deadlock victims; want 0", fails, deadlocks)
			}
			for key, n := range runs {
				if n != 1 {
					t.Errorf("the work of %s ran %d times", key, n)
				}
			}
			if n := countOrders(t, m.b, orders); n != allInsideKeys || len(runs) != allInsideKeys {
				t.Errorf("%d orders and %d keys run; want %d of each", n, len(runs), allInsideKeys)
			}
		})
	}
}

// Environment of a child of the all-inside race.
const (
	envChildOrders    = "SQLSTORE_TEST_ORDERS"
	envChildIso       = "SQLSTORE_TEST_ISOLATION"
	envChildReturning = "SQLSTORE_TEST_RETURNING"
)

// TestAllInsideChild is the body of a child of
// TestTxAllInsideCrossProcessRace; it is skipped in a normal run.
func TestAllInsideChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("run by TestTxAllInsideCrossProcessRace")
	}
	driver, d := "pgx", sqlstore.Postgres
	var opts []sqlstore.Option
	if os.Getenv(envChildDialect) == "mysql" {
		driver, d = "mysql", sqlstore.MySQL
		if os.Getenv(envChildReturning) == "false" {
			opts = append(opts, sqlstore.WithoutReturning())
		}
	}
	iso, _ := strconv.Atoi(os.Getenv(envChildIso))
	db, err := sql.Open(driver, os.Getenv(envChildDSN))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(allInsideGoroutines + 2)
	s, err := sqlstore.New(db, d, append(opts, sqlstore.WithTable(os.Getenv(envChildTable)), sqlstore.WithoutSweeper())...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	bufio.NewReader(os.Stdin).ReadString('\n')
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	proc, _ := strconv.Atoi(os.Getenv(envChildProc))
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range allInsideGoroutines {
		wg.Go(func() {
			for round := range 2 {
				for j := range allInsideKeys {
					key := "order-" + strconv.Itoa((j+proc*allInsideGoroutines+g)%allInsideKeys)
					ran, err := doInTx(ctx, e, s, sql.IsolationLevel(iso), os.Getenv(envChildOrders), key)
					out.Lock()
					if ran && err == nil {
						fmt.Println("RUN", key)
					}
					if err != nil {
						fmt.Println("FAIL", "round", round, strings.ReplaceAll(err.Error(), "\n", " "))
					}
					out.Unlock()
				}
			}
		})
	}
	wg.Wait()
}
