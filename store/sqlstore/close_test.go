package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestCloseWhileOperationsRun closes Stores while 16 goroutines claim
// keys through them, with SetNX and SetNXBatch, on each database: Stores
// from store.Open, whose Close closes the pool, and from New, whose Close
// closes the prepared statements. An operation that Close cut short must
// fail with an error wrapping sqlstore.ErrClosed (and so
// store.ErrUnavailable), not with database/sql's "sql: database is
// closed" or "sql: statement is closed".
func TestCloseWhileOperationsRun(t *testing.T) {
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends() {
		for _, owned := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/owned=%v", b.name, owned), func(t *testing.T) {
				for round := range 10 {
					var s store.Store
					if owned {
						u := *pgURL
						if b == my {
							u = *mysqlURL(t)
						}
						q := u.Query()
						q.Set("table", freshTable(t, b))
						u.RawQuery = q.Encode()
						if s, err = store.Open(t.Context(), u.String()); err != nil {
							t.Fatal(err)
						}
					} else {
						s = newStore(t, b)
					}
					var wg sync.WaitGroup
					errs := make([]error, 16)
					for g := range errs {
						wg.Go(func() {
							for i := 0; ; i++ {
								key := fmt.Sprintf("k%d-%d", g, i)
								var err error
								if i%2 == 0 {
									_, _, err = s.SetNX(context.Background(), key, []byte("v"), time.Hour)
								} else {
									_, err = s.(store.Batcher).SetNXBatch(context.Background(), []store.BatchItem{{Key: key, Value: []byte("v"), TTL: time.Hour}})
								}
								if err != nil {
									errs[g] = err
									return
								}
							}
						})
					}
					time.Sleep(20 * time.Millisecond)
					if err := s.(store.Closer).Close(); err != nil {
						t.Fatal(err)
					}
					wg.Wait()
					for g, err := range errs {
						if !errors.Is(err, sqlstore.ErrClosed) || !errors.Is(err, store.ErrUnavailable) {
							t.Fatalf("round %d: goroutine %d: %v; want an error wrapping sqlstore.ErrClosed", round, g, err)
						}
					}
				}
			})
		}
	}
}

// TestSweepAfterClose calls Sweep on closed Stores, from store.Open
// (whose Close closed the pool) and from New: it fails with an error
// wrapping sqlstore.ErrClosed, as every other operation does, not with
// database/sql's "sql: database is closed", and deletes nothing.
func TestSweepAfterClose(t *testing.T) {
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends() {
		for _, owned := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/owned=%v", b.name, owned), func(t *testing.T) {
				table := freshTable(t, b)
				var s interface {
					store.Store
					Sweep(context.Context) (int64, error)
					Close() error
				}
				if owned {
					u := *pgURL
					if b == my {
						u = *mysqlURL(t)
					}
					q := u.Query()
					q.Set("table", table)
					u.RawQuery = q.Encode()
					st, err := store.Open(t.Context(), u.String())
					if err != nil {
						t.Fatal(err)
					}
					s = st.(*sqlstore.Store)
				} else {
					if s, err = sqlstore.New(b.db, b.dialect, sqlstore.WithTable(table), sqlstore.WithoutSweeper()); err != nil {
						t.Fatal(err)
					}
				}
				mustSet(t, s, "old", []byte("v"), time.Millisecond)
				waitExpired(t, s, "old")
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if n, err := s.Sweep(t.Context()); n != 0 || !errors.Is(err, sqlstore.ErrClosed) {
					t.Errorf("Sweep after Close = %d, %v; want 0 and an error wrapping sqlstore.ErrClosed", n, err)
				}
				if got := rowCount(t, b, table); got != 1 {
					t.Errorf("%d rows left, want the expired row", got)
				}
			})
		}
	}
}
