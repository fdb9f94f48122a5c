package sqlstore_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// rowCount counts the rows of table, expired or not.
func rowCount(t *testing.T, b *backend, table string) int {
	t.Helper()
	var n int
	if err := b.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitExpired waits until key reads as absent.
func waitExpired(t *testing.T, s store.Store, key string) {
	t.Helper()
	testkit.WaitFor(t, "the database's clock to pass the TTL of "+key, func() bool {
		_, err := s.Get(t.Context(), key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err != nil
	})
}

// TestSweep fills a table with expired and live rows, holds a lock on one
// expired row as live traffic would, and sweeps in batches: every other
// expired row goes, the live rows and the locked row stay, and the sweep
// does not wait for the lock.
func TestSweep(t *testing.T) {
	const expired, live, batch = 230, 20, 50
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			table := freshTable(t, b)
			s, err := sqlstore.New(b.db, b.dialect, sqlstore.WithTable(table), sqlstore.WithoutSweeper(), sqlstore.WithSweepBatch(batch))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range expired {
				mustSet(t, s, fmt.Sprintf("old%d", i), []byte("v"), time.Millisecond)
			}
			for i := range live {
				mustSet(t, s, fmt.Sprintf("live%d", i), []byte("v"), time.Hour)
			}
			waitExpired(t, s, fmt.Sprintf("old%d", expired-1))

			// Live traffic holds the expired row old0: a transaction
			// reclaiming it has not committed yet.
			tx, err := b.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			lock := "SELECT idem_key FROM " + table + " WHERE idem_key = $1 FOR UPDATE"
			if b == my {
				lock = "SELECT idem_key FROM " + table + " WHERE idem_key = ? FOR UPDATE"
			}
			if _, err := tx.ExecContext(t.Context(), lock, []byte("old0")); err != nil {
				t.Fatal(err)
			}

			n, err := s.Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n != expired-1 {
				t.Errorf("Sweep deleted %d rows, want %d (every expired row but the locked one)", n, expired-1)
			}
			if got := rowCount(t, b, table); got != live+1 {
				t.Errorf("%d rows left, want %d live and the locked one", got, live)
			}
			tx.Rollback()
			if n, err := s.Sweep(t.Context()); err != nil || n != 1 {
				t.Errorf("Sweep after the lock went = %d, %v; want 1, nil", n, err)
			}
		})
	}
}

// TestSweeperRunsAndStops starts stores with a fast sweeper, sees each
// sweep, and checks that Close stops every sweeper: no pass reports after
// Close returns, and every sweeper goroutine exits.
func TestSweeperRunsAndStops(t *testing.T) {
	var stores []*sqlstore.Store
	var passes atomic.Int64
	for _, b := range backends() {
		for range 3 {
			swept := make(chan int64, 100)
			s, err := sqlstore.New(b.db, b.dialect, sqlstore.WithTable(freshTable(t, b)),
				sqlstore.WithSweepInterval(5*time.Millisecond),
				sqlstore.WithOnSweep(func(n int64, err error) {
					passes.Add(1)
					if err != nil {
						t.Errorf("sweep: %v", err)
					}
					select {
					case swept <- n:
					default:
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, s)
			mustSet(t, s, "k", []byte("v"), time.Millisecond)
			for n := int64(0); n == 0; n = <-swept {
			}
		}
	}
	if n := sweepers(); n != len(stores) {
		t.Errorf("%d sweeper goroutines with %d stores, want one each", n, len(stores))
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	closed := passes.Load()
	// A sweeper's goroutine is still returning for a moment after it
	// signals Close (its deferred Done runs before it exits), so its
	// stack may show briefly; one that is still there a second later has
	// leaked. No pass may report after Close returns: twenty intervals.
	for deadline := time.Now().Add(time.Second); sweepers() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := sweepers(); n != 0 {
		t.Fatalf("%d sweeper goroutines a second after Close, want 0", n)
	}
	time.Sleep(20 * 5 * time.Millisecond)
	if n := passes.Load() - closed; n != 0 {
		t.Errorf("%d sweeps reported after Close returned, want 0", n)
	}
	_, _, err := stores[0].SetNX(t.Context(), "k", []byte("v"), time.Minute)
	if !errors.Is(err, sqlstore.ErrClosed) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("SetNX after Close = %v, want ErrClosed wrapping ErrUnavailable", err)
	}
}

// sweepers counts the goroutines running a Store's sweeper loop. It
// counts by stack rather than runtime.NumGoroutine, since drivers start
// and stop goroutines of their own.
func sweepers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "sqlstore.(*Store).sweepLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
