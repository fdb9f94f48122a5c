package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

const urlSecret = "s3cr3t-PASS"

// A bad store URL stops the demo at start-up with an error that names the
// problem (issue 11, item 15), before it listens, and never shows the
// password.
func TestBadStoreURLRefusedAtStart(t *testing.T) {
	for rawURL, want := range map[string]string{
		"localhost:6379": `unknown store URL scheme "localhost"`,
		"127.0.0.1:6379": "invalid",
		"redis://:" + urlSecret + "@localhost:notaport": "invalid port",
		"redis://:" + urlSecret + "@h:70000":            "port must be a number",
		"redis://:" + urlSecret + "@h/0?bogus=1":        "bogus",
		"redis://" + urlSecret + "@h":                   "user but no password",
		"http://:" + urlSecret + "@h":                   `"http"`,
		"bolt://":                                       "needs a file",
		"mem://?capacity=0":                             "capacity",
	} {
		var stdout, stderr syncBuffer
		err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-store", rawURL}, &stdout, &stderr)
		require.Error(t, err, rawURL)
		assert.ErrorIs(t, err, store.ErrInvalid, rawURL)
		assert.Contains(t, err.Error(), want, rawURL)
		assert.NotContains(t, err.Error(), urlSecret, rawURL)
		assert.NotContains(t, stdout.String()+stderr.String(), urlSecret, rawURL)
		assert.NotContains(t, stdout.String(), "listening", rawURL)
		assert.Equal(t, 1, exitCode(err, &syncBuffer{}), rawURL)
	}
}

// IDEMKIT_* variables configure the demo; flags override them; a misspelt
// variable is a usage error.
func TestEnvironment(t *testing.T) {
	t.Setenv("IDEMKIT_STORE", "mem://?capacity=1000")
	t.Setenv("IDEMKIT_ON_STORE_ERROR", "open")
	t.Setenv("IDEMKIT_FALLBACK", "mem://")
	cfg, err := parseFlags(nil, &syncBuffer{})
	require.NoError(t, err)
	assert.Equal(t, "mem://?capacity=1000", cfg.stack.Store)
	assert.Equal(t, "mem://", cfg.stack.Fallback)
	assert.Equal(t, idemkit.FailOpen, cfg.stack.OnStoreError)

	cfg, err = parseFlags([]string{"-store", "bolt://x.db", "-on-store-error", "closed"}, &syncBuffer{})
	require.NoError(t, err)
	assert.Equal(t, "bolt://x.db", cfg.stack.Store)
	assert.Equal(t, idemkit.FailClosed, cfg.stack.OnStoreError)

	t.Setenv("IDEMKIT_STOR", "mem://")
	var stderr syncBuffer
	_, err = parseFlags(nil, &stderr)
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, stderr.String(), "IDEMKIT_STOR")
}

// The in-memory order list is bounded, in total and per user (issue 11,
// item 11): past a bound, orders are refused and none is forgotten.
func TestMemoryOrdersBounded(t *testing.T) {
	ctx := context.Background()
	r := newMemoryOrders(3, 2)
	for i := range 2 {
		_, created, err := r.Create(ctx, Order{SKU: "a", Qty: 1, User: "mallory"}, fmt.Sprint("k", i))
		require.NoError(t, err)
		require.True(t, created)
	}
	_, _, err := r.Create(ctx, Order{SKU: "a", Qty: 1, User: "mallory"}, "k2")
	require.ErrorIs(t, err, errOrdersFull)
	// The flood took only mallory's share: alice still gets her order, and
	// a retry of mallory's first key still finds it.
	_, created, err := r.Create(ctx, Order{SKU: "b", Qty: 1, User: "alice"}, "k0")
	require.NoError(t, err)
	require.True(t, created)
	o, created, err := r.Create(ctx, Order{SKU: "a", Qty: 1, User: "mallory"}, "k0")
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, uint64(1), o.ID)
	// Now the list is full for everyone.
	_, _, err = r.Create(ctx, Order{SKU: "c", Qty: 1, User: "bob"}, "k0")
	require.ErrorIs(t, err, errOrdersFull)
	list, err := r.List(ctx, "mallory")
	require.NoError(t, err)
	assert.Len(t, list, 2)
}

// The service answers a full order list with 507, and creates nothing.
func TestOrdersFullAnswers507(t *testing.T) {
	mem := testkit.NewMem(t)
	t.Cleanup(func() { _ = mem.Close() })
	e, err := idemkit.New(mem, idemkit.WithObserver(nil))
	require.NoError(t, err)
	orders := newMemoryOrders(1, 1)
	h, err := newHandler(e, orders, time.Second, discardLogger())
	require.NoError(t, err)
	a := &testApp{t: t, handler: h, orders: orders}
	require.Equal(t, http.StatusCreated, a.post("/orders", "alice", book, "Idempotency-Key", "k1").Code)
	w := a.post("/orders", "bob", book, "Idempotency-Key", "k1")
	problem(t, w, http.StatusInsufficientStorage, problemOrdersFull)
	assert.Empty(t, a.listOrders("bob"))
}

// The same binary runs unchanged on every store by URL: memory, a bbolt
// file, a standalone Redis, a Redis Cluster, Redis behind Sentinel,
// PostgreSQL and MariaDB (in databases made for the test and dropped
// after it).
// Every endpoint works and a duplicate storm makes one order per
// submission.
func TestEndToEndEveryStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary over five stores")
	}
	bin := buildDemo(t)
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t, 3)
	sn := redistest.StartSentinel(t)
	for name, rawURL := range map[string]string{
		"memory":   "mem://?capacity=100000",
		"bolt":     "bolt://" + filepath.Join(t.TempDir(), "demo.db") + "?nosync=true",
		"redis":    "redis://" + srv.Addr() + "/2?prefix=e2e:",
		"cluster":  "redis+cluster://" + strings.Join(cl.Addrs(), ","),
		"sentinel": sn.URL("prefix=e2e:"),
		"postgres": sqlTestURL(t, "pgx", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/%s?sslmode=disable&create_table=true"),
		"mariadb":  sqlTestURL(t, "mysql", "root@tcp(127.0.0.1:3306)/", "mysql://root@127.0.0.1:3306/%s?create_table=true"),
	} {
		if rawURL == "" {
			t.Logf("%s: server not reachable, skipped", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			p := startDemo(t, bin, "-addr", "127.0.0.1:0", "-store", rawURL, "-log-level", "warn")
			c := &http.Client{Timeout: 30 * time.Second}
			for _, k := range driveEveryEndpoint(t, c, p.url) {
				checkReplayed(t, c, p.url, k)
			}
			results, err := storm(context.Background(), stormConfig{baseURL: p.url, copies: 10, users: 3})
			require.NoError(t, err)
			require.NoError(t, checkStormResults(results))
			p.kill()
		})
	}
}

// With IDEMKIT_STORE naming a Redis, the demo serves from it: the variable
// alone chooses the store.
func TestEnvironmentChoosesRedis(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv("IDEMKIT_STORE", "redis://"+srv.Addr()+"/3")
	url, stop := runInBackground(t, "-addr", "127.0.0.1:0", "-log-level", "error")
	checkKeyMode(t, url, "env-1")
	require.NoError(t, stop())
	n, err := srv.Client(t).DBSize(context.Background()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "database 0 is untouched")
	o := srv.Options()
	o.DB = 3
	db3 := redis.NewClient(o)
	defer db3.Close()
	n, err = db3.DBSize(context.Background()).Result()
	require.NoError(t, err)
	assert.Positive(t, n, "the records are in database 3")
}

// After Redis restarts, the demo answers again within a few milliseconds
// of Redis answering, instead of up to a second later (issue 11, item 4).
// The figure is logged: go test -v -run TestRecoveryAfterRedisRestart.
func TestRecoveryAfterRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	svc := startTestService(t, redisConfig(srv.Addr()))
	client := &http.Client{Timeout: 10 * time.Second}
	health := func() int { return doHTTP(t, client, http.MethodGet, svc.url+"/healthz", "", "").status }
	require.Equal(t, http.StatusOK, health())
	var lags []time.Duration
	for range 3 {
		srv.Stop()
		var wg sync.WaitGroup
		for range 4 { // traffic during the outage trips go-redis's dial breaker
			wg.Go(func() {
				for range 8 {
					doHTTP(t, client, http.MethodPost, svc.url+"/orders/quick", "load", pen)
				}
			})
		}
		wg.Wait()
		srv.Restart()
		back := time.Now()
		for health() != http.StatusOK {
			time.Sleep(time.Millisecond)
		}
		lags = append(lags, time.Since(back).Round(time.Millisecond))
	}
	t.Logf("first 200 from /healthz after Redis answered PING again: %v", lags)
}

// sqlTestURL creates a database with a unique name through the server at
// adminDSN (driver's DSN form), drops it when the test ends, and returns
// urlPattern with its name; "" when the server does not answer.
func sqlTestURL(t *testing.T, driver, adminDSN, urlPattern string) string {
	t.Helper()
	db, err := sql.Open(driver, adminDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if db.PingContext(ctx) != nil {
		return ""
	}
	name := fmt.Sprintf("idemdemo_e2e_%d", time.Now().UnixNano())
	_, err = db.ExecContext(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		drop := "DROP DATABASE " + name
		if driver == "pgx" {
			drop += " WITH (FORCE)"
		}
		_, err := db.ExecContext(context.Background(), drop)
		assert.NoError(t, err)
	})
	return fmt.Sprintf(urlPattern, name)
}
