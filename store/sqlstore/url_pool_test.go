package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// poolOps is how many operations TestOpenURLBoundsConnections runs at
// once: more than any bound it checks, few enough that an unbounded pool
// does not exhaust a test server shared with other tests (PostgreSQL's
// default max_connections is 100).
const poolOps = 40

// TestOpenURLBoundsConnections opens each database through a URL in a
// database of its own, with the default pool bound and with max_open=4,
// and runs poolOps SetNX of one key at once while a transaction holds the
// key's row: each waits on the row holding a connection, so an unbounded
// pool opens one connection per operation. The server's own count of
// sessions of that database (pg_stat_activity, the processlist) must
// never exceed the bound, and every operation must succeed once the
// transaction commits, replaying its record.
func TestOpenURLBoundsConnections(t *testing.T) {
	for _, b := range backends() {
		for _, c := range []struct {
			query string
			bound int
		}{{"", sqlstore.DefaultURLMaxOpen}, {"max_open=4&max_idle=2&max_lifetime=1m&max_idle_time=30s", 4}} {
			t.Run(fmt.Sprintf("%s/max_open=%d", b.name, c.bound), func(t *testing.T) {
				u, count := poolDatabase(t, b)
				q := "table=pooled&create_table=true"
				if c.query != "" {
					q += "&" + c.query
				}
				if u.RawQuery != "" {
					q = u.RawQuery + "&" + q
				}
				u.RawQuery = q
				opened, err := store.Open(t.Context(), u.String())
				if err != nil {
					t.Fatal(err)
				}
				s := opened.(*sqlstore.Store)
				defer s.Close()
				if got := s.DB().Stats().MaxOpenConnections; got != c.bound {
					t.Fatalf("MaxOpenConnections = %d, want %d", got, c.bound)
				}
				checkPoolBound(t, s, count, c.bound)
			})
		}
	}
}

// checkPoolBound holds key "k" in a transaction on s's pool, runs poolOps
// SetNX of it, and checks the server's session count against bound until
// every one has queued for a connection or waits on the row; then it
// commits and checks that each replays the record.
func checkPoolBound(t *testing.T, s *sqlstore.Store, count func() int, bound int) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if set, _, err := s.Tx(tx).SetNX(ctx, "k", []byte("done"), time.Minute); err != nil || !set {
		t.Fatalf("SetNX in the transaction = %v, %v", set, err)
	}
	var wg sync.WaitGroup
	var ended atomic.Int32
	errs := make([]error, poolOps)
	for i := range errs {
		wg.Go(func() {
			defer ended.Add(1)
			set, e, err := s.SetNX(ctx, "k", []byte("dup"+strconv.Itoa(i)), time.Minute)
			if err == nil && (set || string(e.Value) != "done") {
				err = fmt.Errorf("SetNX = %v, %q; want false, the committed record", set, e.Value)
			}
			errs[i] = err
		})
	}
	// The transaction holds one connection; bound-1 operations wait on the
	// row, each on one; the others queue in database/sql. Once every
	// connection of the pool is in use and operations queue for more, the
	// pool is full, and the server is sampled a few more times: its count
	// of a session that is still logging in may lag the pool's. (Counting
	// the waits to expect every operation queued made this loop wait for
	// the row's lock timeout when a few operations were slow to start; so
	// did waiting for a full pool, under load.)
	// Operations that contend on the row may let go of their connection
	// between attempts, so the pool need not be seen full: once operations
	// have queued for a connection, the server is sampled for a few
	// seconds at most.
	peak, after := 0, 0
	var queued time.Time
	for {
		n := count()
		peak = max(peak, n)
		if n > bound {
			t.Errorf("the server counts %d sessions of the database, over the bound %d", n, bound)
			break
		}
		if st := s.DB().Stats(); st.WaitCount > 0 {
			if queued.IsZero() {
				queued = time.Now()
			}
			if st.InUse == bound {
				after++
			}
			if after == 20 || time.Since(queued) > 5*time.Second {
				break
			}
		}
		if ended.Load() > 0 {
			t.Errorf("%d operations ended while the row was held (%+v, %d sessions)", ended.Load(), s.DB().Stats(), n)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("operations did not queue: %+v, %d sessions", s.DB().Stats(), n)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := count(); n > bound {
		t.Errorf("after the run the server counts %d sessions, over the bound %d", n, bound)
	}
	t.Logf("peak %d sessions for %d operations, bound %d; %d waits for a connection", peak, poolOps, bound, s.DB().Stats().WaitCount)
}

// poolDatabase creates a database of its own on b, dropped when t ends,
// and returns its URL and a function that counts the server's sessions
// connected to it (the counting session, on the test database, is not
// one of them).
func poolDatabase(t *testing.T, b *backend) (*url.URL, func() int) {
	name := "pool_" + strings.ToLower(randHex(4))
	if _, err := b.db.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	query := `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1`
	drop := "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"
	var u *url.URL
	if b == my {
		query = `SELECT COUNT(*) FROM information_schema.processlist WHERE db = ?`
		drop = "DROP DATABASE IF EXISTS " + name
		u = mysqlURL(t)
		u.Path = "/" + name
	} else {
		var err error
		if u, err = url.Parse(pg.dsn); err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
	}
	t.Cleanup(func() {
		if _, err := b.db.ExecContext(context.Background(), drop); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return u, func() int {
		var n int
		if err := b.db.QueryRowContext(t.Context(), query, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// TestOpenURLPoolParameterRefusals: a pool parameter that is not a valid
// bound is refused, naming the parameter, before any connection is made
// (the server at port 1 would make it store.ErrUnavailable).
func TestOpenURLPoolParameterRefusals(t *testing.T) {
	for _, base := range []string{"postgres://postgres@127.0.0.1:1/db?sslmode=disable&", "mysql://root@127.0.0.1:1/db?"} {
		for q, want := range map[string]string{
			"max_open=0":            "max_open",
			"max_open=-1":           "max_open",
			"max_open=many":         "max_open",
			"max_open=":             "max_open",
			"max_open=1&max_open=2": `"max_open" given 2 times`,
			"max_idle=-1":           "max_idle",
			"max_idle=x":            "max_idle",
			"max_open=4&max_idle=5": "max_idle=5",
			"max_idle=17":           "max_idle=17",
			"max_lifetime=1h;x":     "';'",
			"max_lifetime=10":       "max_lifetime",
			"max_lifetime=-1s":      "max_lifetime",
			"max_idle_time=soon":    "max_idle_time",
			"max_idle_time=-5m":     "max_idle_time",
		} {
			rawURL := base + q
			s, err := store.Open(t.Context(), rawURL)
			if err == nil {
				s.(store.Closer).Close()
				t.Errorf("Open(%s) succeeded", rawURL)
				continue
			}
			if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Open(%s) = %v; want ErrInvalid, not ErrUnavailable", rawURL, err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%s) = %v; want an error naming %s", rawURL, err, want)
			}
		}
	}
}

// TestOpenURLPoolSettings checks that the pool parameters and the
// defaults reach the *sql.DB.
func TestOpenURLPoolSettings(t *testing.T) {
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []*url.URL{pgURL, mysqlURL(t)} {
		for q, want := range map[string]int{
			"":                       sqlstore.DefaultURLMaxOpen,
			"max_open=3":             3,
			"max_open=64&max_idle=1": 64,
		} {
			u := *base
			v := u.Query()
			v.Set("table", "pool_settings")
			u.RawQuery = v.Encode()
			if q != "" {
				u.RawQuery += "&" + q
			}
			s, err := store.Open(t.Context(), u.String())
			if err != nil {
				t.Fatal(err)
			}
			db := s.(*sqlstore.Store).DB()
			if got := db.Stats().MaxOpenConnections; got != want {
				t.Errorf("Open(%s): MaxOpenConnections = %d, want %d", store.Redact(u.String()), got, want)
			}
			s.(store.Closer).Close()
		}
	}
}
