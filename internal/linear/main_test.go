package linear_test

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// longEnv names the variable that turns on the long version: its value is
// the time spent recording histories for each store and fault, a Go
// duration such as 2m.
const longEnv = "IDEMKIT_LINEAR_LONG"

// The SQL servers' administrative DSNs, as store/sqlstore's tests take them.
const (
	envPostgres     = "IDEMKIT_TEST_POSTGRES_DSN"
	envMySQL        = "IDEMKIT_TEST_MYSQL_DSN"
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultMySQL    = "root@tcp(127.0.0.1:3306)/"
)

// plan is how much a case records: histories of one workload each, until
// count histories or budget have passed.
type plan struct {
	count  int
	budget time.Duration
	work   linear.Workload
}

func init() {
	// The driver logs every connection a fault breaks; the history says
	// what matters.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

func planFor(t *testing.T) plan {
	p := plan{
		count: 2,
		work: linear.Workload{
			Clients: 4, Keys: 3, Values: 4, MaxOps: 200, Think: 10 * time.Millisecond, Backoff: 50 * time.Millisecond,
			Duration: 1500 * time.Millisecond, OpTimeout: 500 * time.Millisecond,
		},
	}
	if v := os.Getenv(longEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration such as 2m", longEnv, v)
		}
		p.count, p.budget = 1<<30, d
		p.work.Clients, p.work.Keys, p.work.MaxOps, p.work.Duration = 6, 4, 1000, 5*time.Second
	}
	return p
}

// fault is one kind of fault: inject starts it, heal ends it. Both run on
// the test's goroutine.
type fault struct {
	name   string
	inject func(t *testing.T)
	heal   func(t *testing.T)
}

var noFault = fault{name: "none"}

// Bounds of the nemesis within one history.
const (
	maxFaults = 6
	minGap    = 100 * time.Millisecond
	maxGap    = 300 * time.Millisecond
	minHold   = 100 * time.Millisecond
	maxHold   = 900 * time.Millisecond
)

func randDur(lo, hi time.Duration) time.Duration { return lo + rand.N(hi-lo) }

// pause waits for d or until done closes, and reports whether done closed.
func pause(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// nemesis injects f at random times, each for a bounded time, at most
// maxFaults times, until done closes; it returns how many it injected.
func nemesis(t *testing.T, f fault, done <-chan struct{}) int {
	if f.inject == nil {
		<-done
		return 0
	}
	n := 0
	for n < maxFaults {
		if pause(randDur(minGap, maxGap), done) {
			return n
		}
		f.inject(t)
		n++
		over := pause(randDur(minHold, maxHold), done)
		f.heal(t)
		if over {
			return n
		}
	}
	<-done
	return n
}

// runID makes the key namespaces of this process unique.
var runID = randHex(4)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// runCase records histories of s under f and checks each.
func runCase(t *testing.T, storeName string, s store.Store, f fault) {
	runCaseStats(t, storeName, s, f, nil, 0)
}

// runCaseStats is runCase, adding the histories' figures to sum when it
// is not nil, and recording short histories in the short version when
// short is positive instead of the plan's count.
func runCaseStats(t *testing.T, storeName string, s store.Store, f fault, sum *linear.Stats, short int) {
	p := planFor(t)
	if short > 0 && p.budget == 0 {
		p.count = short
	}
	start := time.Now()
	var total linear.Stats
	histories, injected := 0, 0
	for h := 0; h < p.count && (p.budget == 0 || time.Since(start) < p.budget); h++ {
		w := p.work
		w.Prefix = fmt.Sprintf("lin:%s:%s:%d:", runID, f.name, h)
		w.Seed = rand.Uint64()
		var ops []porcupine.Operation
		var stats linear.Stats
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			ops, stats, err = linear.Run(s, w)
		}()
		injected += nemesis(t, f, done)
		if err != nil {
			t.Errorf("history %d: %v", h, err)
		}
		linear.CheckT(t, ops, fmt.Sprintf("%s-%s-%d", storeName, f.name, h))
		histories++
		total.Add(stats)
	}
	t.Logf("RESULT store=%s fault=%s histories=%d ops=%d unknown=%d notsent=%d batches=%d faults=%d longttl=%d linearizable=%v time=%v",
		storeName, f.name, histories, total.Ops, total.Unknown, total.NotSent, total.Batches, injected, total.LongTTL, !t.Failed(), time.Since(start).Round(time.Millisecond))
	for _, e := range total.Errors {
		t.Logf("unknown outcome, e.g.: %s", e)
	}
	if sum != nil {
		sum.Add(total)
	}
}

func TestMemstore(t *testing.T) {
	s, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	runCase(t, "memstore", s, noFault)
}

func TestBoltstore(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "idem.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	runCase(t, "boltstore", s, noFault)
}

// proxyFaults are the network faults of a store reached through p.
func proxyFaults(p *linear.Proxy) []fault {
	heal := func(*testing.T) { p.Heal() }
	return []fault{
		{name: "delay", inject: func(*testing.T) { p.SetDelay(randDur(time.Millisecond, 50*time.Millisecond)) }, heal: heal},
		{name: "reset", inject: func(*testing.T) { p.Reset() }, heal: heal},
		{name: "blackhole", inject: func(*testing.T) { p.Blackhole() }, heal: heal},
		// Replies held back by a delay are lost when the connections
		// reset: writes that happened, whose callers never learn it.
		{name: "lost-replies", inject: func(*testing.T) { p.SetDelay(30 * time.Millisecond) }, heal: func(*testing.T) { p.Reset(); p.Heal() }},
	}
}

func newProxy(t *testing.T, target string) *linear.Proxy {
	p, err := linear.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestRedisstore(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	p := newProxy(t, srv.Addr())
	// The restart is seen directly, so that a refused dial (no request
	// sent) is told from a lost reply; the network faults go through p.
	direct := newRedisStore(t, srv.Addr())
	proxied := newRedisStore(t, p.Addr())
	restart := fault{
		name:   "restart",
		inject: func(*testing.T) { srv.Stop() },
		heal:   func(*testing.T) { srv.Restart() },
	}
	for _, f := range append([]fault{noFault, restart}, proxyFaults(p)...) {
		s := proxied
		if f.name == "restart" {
			s = direct
		}
		t.Run(f.name, func(t *testing.T) { runCase(t, "redisstore", s, f) })
	}
}

// newRedisStore returns a Store over a client of addr, set as
// redisstore.OpenURL sets it: no retries (a retried write may have
// happened) and the caller's deadline bounding every command.
func newRedisStore(t *testing.T, addr string) store.Store {
	client := redis.NewClient(redisOptions(addr))
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func redisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                     addr,
		MaxRetries:               -1,
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// sqlCase is one SQL server: a fresh database, a pool reaching it through
// a fault proxy, and a way to kill its sessions.
type sqlCase struct {
	name    string
	dialect sqlstore.Dialect
	admin   *sql.DB
	db      *sql.DB // through the proxy
	proxy   *linear.Proxy
	kill    func(t *testing.T)
	// directDSN reaches the database without the proxy.
	directDSN string
}

func TestSQLStore(t *testing.T) {
	for _, setup := range []func(t *testing.T, name string) *sqlCase{setupPostgres, setupMariaDB} {
		name := fmt.Sprintf("idemkit_linear_%d_%s", os.Getpid(), randHex(4))
		c := setup(t, name)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // PostgreSQL and MariaDB side by side: their histories are apart
			stmts, err := sqlstore.Schema(c.dialect, "idem")
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range stmts {
				if _, err := c.db.Exec(st); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
			}
			s, err := sqlstore.New(c.db, c.dialect, sqlstore.WithTable("idem"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			kill := fault{name: "kill", inject: c.kill, heal: func(*testing.T) {}}
			for _, f := range append([]fault{noFault, kill}, proxyFaults(c.proxy)...) {
				t.Run(f.name, func(t *testing.T) { runCase(t, c.name, s, f) })
			}
			t.Run("statement-timeout", func(t *testing.T) { runTimeoutCase(t, c) })
		})
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func setupPostgres(t *testing.T, name string) *sqlCase {
	adminDSN := envOr(envPostgres, defaultPostgres)
	u, err := url.Parse(adminDSN)
	if err != nil {
		t.Fatalf("%s is not a URL", envPostgres)
	}
	admin, err := sql.Open("pgx", adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("PostgreSQL (./scripts/test.sh starts it; or set %s): %v", envPostgres, err)
	}
	p := newProxy(t, u.Host)
	u.Path = "/" + name
	direct := u.String()
	u.Host = p.Addr()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() {
		_ = db.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return &sqlCase{name: "postgres", dialect: sqlstore.Postgres, admin: admin, db: db, proxy: p, directDSN: direct,
		kill: func(t *testing.T) {
			if _, err := admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
				t.Errorf("terminating sessions: %v", err)
			}
		}}
}

func setupMariaDB(t *testing.T, name string) *sqlCase {
	cfg, err := mysql.ParseDSN(envOr(envMySQL, defaultMySQL))
	if err != nil {
		t.Fatalf("%s does not parse", envMySQL)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("MariaDB (./scripts/test.sh starts it; or set %s): %v", envMySQL, err)
	}
	p := newProxy(t, cfg.Addr)
	cfg.DBName = name
	direct := cfg.FormatDSN()
	cfg.Addr = p.Addr()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() {
		_ = db.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return &sqlCase{name: "mariadb", dialect: sqlstore.MySQL, admin: admin, db: db, proxy: p, directDSN: direct,
		kill: func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ?", name)
			if err != nil {
				t.Errorf("listing sessions: %v", err)
				return
			}
			var ids []int64
			for rows.Next() {
				var id int64
				if rows.Scan(&id) == nil {
					ids = append(ids, id)
				}
			}
			_ = rows.Close()
			for _, id := range ids {
				_, _ = admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)) // it may have ended
			}
		}}
}
