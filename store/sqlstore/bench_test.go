package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/stepbench"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// Benchmarks of SetNX beside the raw statement it improves on, on the same
// table, interleaved op by op so that both see the same load:
//
//	go test -run '^$' -bench . -benchtime 2000x ./store/sqlstore/
//
// BenchmarkClaim: SetNX of a new key vs INSERT ... ON CONFLICT DO NOTHING
// (PostgreSQL) or INSERT IGNORE (MySQL). BenchmarkReplay: SetNX of a held
// key, returning the record, vs a primary-key SELECT of it. The raw
// statements are prepared, as the Store's are. Each reports ns/op of both
// and their ratio, x-raw.

// benchSeq numbers keys across benchmark runs.
var benchSeq atomic.Int64

func BenchmarkClaim(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			s := newStore(b, be)
			raw := "INSERT INTO " + s.Table() + " (idem_key, idem_value, expires_at) VALUES ($1, $2, statement_timestamp() + interval '1 hour') ON CONFLICT DO NOTHING"
			if be == my {
				raw = "INSERT IGNORE INTO " + s.Table() + " (idem_key, idem_value, expires_at, rev) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 0)"
			}
			st := prepare(b, be.db, raw)
			value := []byte("claim:0123456789abcdef")
			paired(b, func() error {
				_, err := st.ExecContext(context.Background(), benchKey(), value)
				return err
			}, func() error {
				set, _, err := s.SetNX(context.Background(), string(benchKey()), value, time.Hour)
				if err == nil && !set {
					b.Fatal("SetNX of a new key did not set")
				}
				return err
			})
		})
	}
}

func BenchmarkReplay(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			s := newStore(b, be)
			mustSet(b, s, "held", []byte("done:0123456789abcdef"), time.Hour)
			raw := "SELECT idem_value FROM " + s.Table() + " WHERE idem_key = $1"
			if be == my {
				raw = "SELECT idem_value FROM " + s.Table() + " WHERE idem_key = ?"
			}
			st := prepare(b, be.db, raw)
			value := []byte("claim:0123456789abcdef")
			paired(b, func() error {
				var v []byte
				return st.QueryRowContext(context.Background(), []byte("held")).Scan(&v)
			}, func() error {
				set, _, err := s.SetNX(context.Background(), "held", value, time.Hour)
				if err == nil && set {
					b.Fatal("SetNX of a held key set it")
				}
				return err
			})
		})
	}
}

// paired runs raw and op alternately b.N times each, timing each, and
// reports both means and op's ratio to raw.
func paired(b *testing.B, raw, op func() error) {
	b.Helper()
	tRaw, tOp := alternate(b, 20, raw, op)
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "ns-raw")
	b.ReportMetric(float64(tOp.Nanoseconds())/float64(b.N), "ns-store")
	b.ReportMetric(float64(tOp)/float64(tRaw), "x-raw")
}

// alternate runs x and y warm times each, then b.N times each in
// alternating order (x first on even rounds, y first on odd ones), so
// drift in the machine's load weighs on both alike, and returns the time
// each took in all.
func alternate(b *testing.B, warm int, x, y func() error) (tx, ty time.Duration) {
	b.Helper()
	for range warm { // warm the pools and statement caches
		if err := x(); err != nil {
			b.Fatal(err)
		}
		if err := y(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		first, second, t1, t2 := x, y, &tx, &ty
		if i%2 == 1 {
			first, second, t1, t2 = y, x, &ty, &tx
		}
		start := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		*t1 += mid.Sub(start)
		*t2 += time.Since(mid)
	}
	return tx, ty
}

// pairedParallel runs raw and op b.N times each, by workers goroutines at
// once, in alternating rounds, and reports the mean time per call of each
// and op's ratio to raw.
func pairedParallel(b *testing.B, workers int, raw, op func() error) {
	b.Helper()
	const rounds = 10
	round := func(f func() error, n int) time.Duration {
		var wg sync.WaitGroup
		var failed atomic.Value
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					if err := f(); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, ok := failed.Load().(error); ok {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	round(raw, workers)
	round(op, workers)
	var tRaw, tOp time.Duration
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r < b.N%rounds {
			n++
		}
		tRaw += round(raw, n)
		tOp += round(op, n)
	}
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "ns-raw")
	b.ReportMetric(float64(tOp.Nanoseconds())/float64(b.N), "ns-store")
	b.ReportMetric(float64(tOp)/float64(tRaw), "x-raw")
}

// keepIdle lets db keep n idle connections until b ends. database/sql
// keeps 2 unless told: between pairedParallel's rounds, 32 callers would
// close 30 connections and open them again in the next round, timing
// connection set-up rather than transactions.
func keepIdle(b *testing.B, db *sql.DB, n int) {
	db.SetMaxIdleConns(n)
	b.Cleanup(func() { db.SetMaxIdleConns(2) })
}

func benchKey() []byte {
	return []byte("bench:" + strconv.FormatInt(benchSeq.Add(1), 10))
}

func prepare(b *testing.B, db *sql.DB, query string) *sql.Stmt {
	st, err := db.Prepare(query)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkBusinessTxFloor is what any record kept in the business
// transaction costs, whatever the store: the business transaction beside
// the same transaction that also inserts a row into a second, plain
// table (a short key and a short text) and then updates it, with
// prepared statements, as AllInside's claim and completion do. Compare
// BenchmarkBusinessTx's AllInside ratios with these.
func BenchmarkBusinessTxFloor(b *testing.B) {
	for _, be := range backends() {
		for _, workers := range []int{1, 32} {
			name := be.name
			if workers > 1 {
				name += "/" + strconv.Itoa(workers)
			}
			b.Run(name, func(b *testing.B) { benchBusinessTxFloor(b, be, workers) })
		}
	}
}

func benchBusinessTxFloor(b *testing.B, be *backend, workers int) {
	orders, records := fmt.Sprintf("orders%d", tables.Add(1)), fmt.Sprintf("records%d", tables.Add(1))
	for _, ddl := range []string{
		"CREATE TABLE " + orders + " (id VARCHAR(64) PRIMARY KEY)",
		"CREATE TABLE " + records + " (id VARCHAR(64) PRIMARY KEY, v VARCHAR(64) NOT NULL)",
	} {
		if _, err := be.db.Exec(ddl); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { be.db.Exec("DROP TABLE " + orders + ", " + records) })
	insert := "INSERT INTO " + orders + " (id) VALUES ($1)"
	claim := "INSERT INTO " + records + " (id, v) VALUES ($1, 'claim')"
	complete := "UPDATE " + records + " SET v = 'done' WHERE id = $1 AND v = 'claim'"
	if be == my {
		insert, claim, complete = strings.ReplaceAll(insert, "$1", "?"), strings.ReplaceAll(claim, "$1", "?"), strings.ReplaceAll(complete, "$1", "?")
	}
	claimSt, completeSt := prepare(b, be.db, claim), prepare(b, be.db, complete)
	ctx := context.Background()
	business := func(record bool) error {
		tx, err := be.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		id := string(benchKey())
		if _, err := tx.ExecContext(ctx, insert, id); err != nil {
			return err
		}
		if record {
			if _, err := tx.StmtContext(ctx, claimSt).ExecContext(ctx, id); err != nil {
				return err
			}
			if _, err := tx.StmtContext(ctx, completeSt).ExecContext(ctx, id); err != nil {
				return err
			}
		}
		return tx.Commit()
	}
	run := paired
	if workers > 1 {
		keepIdle(b, be.db, 2*workers)
		run = func(b *testing.B, raw, op func() error) { pairedParallel(b, workers, raw, op) }
	}
	run(b, func() error { return business(false) }, func() error { return business(true) })
}

// BenchmarkBusinessTx times a business transaction (BEGIN, INSERT order,
// COMMIT) beside the same transaction with its idempotency record, at the
// store level, interleaved. ClaimOutside commits a SetNX on the Store's own
// pool first, then runs the business transaction, which completes the
// record with a CompareAndSwap through the transaction's View, as
// idemkit's Begin and Claim.CompleteIn do. AllInside runs SetNX, the insert
// and the CompareAndSwap in the transaction, as a Do on an engine over the
// View does. WithAsyncClaims variants (PostgreSQL only) commit the claim
// without waiting for its WAL flush.
//
// The /32 variants run 32 callers at once, in alternating rounds of raw
// and idempotent transactions.
func BenchmarkBusinessTx(b *testing.B) {
	type mode struct {
		name    string
		outside bool
		opts    []sqlstore.Option
	}
	for _, be := range backends() {
		modes := []mode{{name: "ClaimOutside", outside: true}, {name: "AllInside"}}
		if be == pg {
			modes = append(modes, mode{name: "ClaimOutsideAsync", outside: true, opts: []sqlstore.Option{sqlstore.WithAsyncClaims()}})
		}
		for _, m := range modes {
			for _, workers := range []int{1, 32} {
				name := be.name + "/" + m.name
				if workers > 1 {
					name += "/" + strconv.Itoa(workers)
				}
				b.Run(name, func(b *testing.B) {
					benchBusinessTx(b, be, workers, m.outside, m.opts)
				})
			}
		}
	}
}

func benchBusinessTx(b *testing.B, be *backend, workers int, outside bool, opts []sqlstore.Option) {
	s := newStore(b, be, opts...)
	orders := fmt.Sprintf("orders%d", tables.Add(1))
	if _, err := be.db.Exec("CREATE TABLE " + orders + " (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.db.Exec("DROP TABLE " + orders) })
	insert := "INSERT INTO " + orders + " (id) VALUES ($1)"
	if be == my {
		insert = "INSERT INTO " + orders + " (id) VALUES (?)"
	}
	ctx := context.Background()
	business := func(id string, during func(tx *sql.Tx) error) error {
		tx, err := be.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, insert, id); err != nil {
			return err
		}
		if err := during(tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	claim, done := []byte("claim:0123456789abcdef"), []byte("done:0123456789abcdef")
	run := paired
	if workers > 1 {
		keepIdle(b, be.db, 2*workers)
		run = func(b *testing.B, raw, op func() error) { pairedParallel(b, workers, raw, op) }
	}
	run(b, func() error {
		return business(string(benchKey()), func(*sql.Tx) error { return nil })
	}, func() error {
		id := string(benchKey())
		if outside {
			if set, _, err := s.SetNX(ctx, id, claim, time.Minute); err != nil || !set {
				return fmt.Errorf("claim: %v, %w", set, err)
			}
		}
		return business(id, func(tx *sql.Tx) error {
			v := s.Tx(tx)
			if !outside {
				if set, _, err := v.SetNX(ctx, id, claim, time.Minute); err != nil || !set {
					return fmt.Errorf("claim: %v, %w", set, err)
				}
			}
			if ok, err := v.CompareAndSwap(ctx, id, claim, done, time.Hour); err != nil || !ok {
				return fmt.Errorf("complete: %v, %w", ok, err)
			}
			return nil
		})
	})
}

// BenchmarkSteps: a keyed operation making three calls, as plain work and
// as three recovery points (internal/stepbench), per database.
func BenchmarkSteps(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) { stepbench.Run(b, newStore(b, be)) })
	}
}
