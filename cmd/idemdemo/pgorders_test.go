package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// envPostgresAdmin points the PostgreSQL tests at another server, as for
// the sqlstore tests: an administrative URL through which they create
// their own database and drop it at the end.
const envPostgresAdmin = "IDEMKIT_TEST_POSTGRES_DSN"

// pgTestDatabase creates a uniquely named PostgreSQL database, dropped
// when the test ends, and returns the demo's store URL for it (the store's
// table created on open) and a pool on it for the test's own queries. It
// skips the test when the local server does not answer and
// IDEMKIT_TEST_POSTGRES_DSN is not set (./scripts/test.sh starts the
// server); with the variable set, a server that does not answer fails it.
func pgTestDatabase(t *testing.T) (storeURL string, db *sql.DB) {
	t.Helper()
	admin, fromEnv := os.LookupEnv(envPostgresAdmin)
	if !fromEnv {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	adb, err := sql.Open(sqlstore.PostgresDriver, admin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = adb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adb.PingContext(ctx); err != nil {
		if !fromEnv {
			t.Skipf("PostgreSQL does not answer at 127.0.0.1:5432 (./scripts/test.sh starts it; or set %s): %v", envPostgresAdmin, err)
		}
		t.Fatalf("PostgreSQL at %s: %v", envPostgresAdmin, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "idemdemo_pg_" + hex.EncodeToString(b)
	_, err = adb.ExecContext(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := adb.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		assert.NoError(t, err)
	})
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.Path = "/" + name
	db, err = sql.Open(sqlstore.PostgresDriver, u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() }) // before the DROP: cleanups run last first
	q := u.Query()
	q.Set("create_table", "true")
	u.RawQuery = q.Encode()
	return u.String(), db
}

// openTestPgOrders returns a pgOrders on a fresh database, which completes
// no idempotency records.
func openTestPgOrders(t *testing.T) *pgOrders {
	t.Helper()
	_, db := pgTestDatabase(t)
	sq, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithoutSweeper())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sq.Close() })
	r, err := openPgOrders(context.Background(), sq, nil)
	require.NoError(t, err)
	return r
}

// startPgService starts the service in process over a fresh PostgreSQL
// database, with extra configured by adjust, and returns it with a pool on
// the database.
func startPgService(t *testing.T, adjust func(*config)) (*service, *sql.DB) {
	t.Helper()
	storeURL, db := pgTestDatabase(t)
	cfg := defaultConfig()
	cfg.stack.Store = storeURL
	if adjust != nil {
		adjust(&cfg)
	}
	return startTestService(t, cfg), db
}

// countRows runs a SELECT count(*) query.
func countRows(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(context.Background(), query, args...).Scan(&n))
	return n
}

// orderRows counts the orders of user under dedupKey in the table.
func orderRows(t *testing.T, db *sql.DB, user, dedupKey string) int {
	t.Helper()
	return countRows(t, db, "SELECT count(*) FROM "+ordersTable+" WHERE user_id = $1 AND dedup_key = $2", user, keyDigest(dedupKey))
}

// On PostgreSQL the orders are rows of idemdemo_orders, made in the
// transaction that completes the idempotency record: one POST makes one
// row, a retry replays the same answer without a second row, and 32
// concurrent copies of one submission make one row and agree on it. The
// window and token routes, the order list and /metrics work the same.
func TestPostgresOrdersEndToEnd(t *testing.T) {
	svc, db := startPgService(t, nil)
	assert.Contains(t, svc.backend.describe(), "orders in the PostgreSQL table idemdemo_orders, each committed in one transaction with its idempotency record")
	require.NotNil(t, svc.backend.txOrders, "the transactional path is on")
	client := &http.Client{Timeout: 20 * time.Second}
	post := func(path, user, body string, header ...string) httpResponse {
		return doHTTP(t, client, http.MethodPost, svc.url+path, user, body, header...)
	}

	r := post("/orders", "alice", book, "Idempotency-Key", "k1")
	first := requireCreated(t, r.status, r.header, r.body, false)
	assert.Equal(t, Order{ID: first.ID, SKU: "book", Qty: 1, User: "alice"}, first)
	assert.Equal(t, 1, orderRows(t, db, "alice", "key:k1"))
	var sku string
	var qty int
	require.NoError(t, db.QueryRow("SELECT sku, qty FROM "+ordersTable+" WHERE id = $1", first.ID).Scan(&sku, &qty))
	assert.Equal(t, "book", sku)
	assert.Equal(t, 1, qty)

	r = post("/orders", "alice", book, "Idempotency-Key", "k1")
	assert.Equal(t, first, requireCreated(t, r.status, r.header, r.body, true))
	assert.Equal(t, 1, orderRows(t, db, "alice", "key:k1"))

	// The same key with another body: 422 from the middleware, no row.
	r = post("/orders", "alice", `{"sku":"pen","qty":1}`, "Idempotency-Key", "k1")
	requireProblem(t, r.status, r.header, r.body, http.StatusUnprocessableEntity, idemhttp.ProblemKeyMismatch)
	assert.Equal(t, 1, countRows(t, db, "SELECT count(*) FROM "+ordersTable))

	// 32 concurrent copies; the delay keeps the first in flight while the
	// others arrive.
	const copies = 32
	answers := make([]httpResponse, copies)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range copies {
		wg.Go(func() {
			<-start
			answers[i] = post("/orders", "bob", book, "Idempotency-Key", "storm", delayHeader, "300ms")
		})
	}
	close(start)
	wg.Wait()
	var fresh, conflicts int
	var order Order
	for _, a := range answers {
		switch {
		case a.status == http.StatusConflict:
			requireProblem(t, a.status, a.header, a.body, http.StatusConflict, idemhttp.ProblemInProgress)
			conflicts++
		default:
			replayed := a.header.Get(idemhttp.ReplayedHeader) == "true"
			o := requireCreated(t, a.status, a.header, a.body, replayed)
			if !replayed {
				fresh++
			}
			if order.ID == 0 {
				order = o
			}
			assert.Equal(t, order, o, "every copy answers the same order")
		}
	}
	assert.Equal(t, 1, fresh, "exactly one copy ran the handler")
	t.Logf("%d copies: 1 fresh 201, %d replays, %d conflicts (409)", copies, copies-1-conflicts, conflicts)
	assert.Equal(t, 1, orderRows(t, db, "bob", "key:storm"))
	r = post("/orders", "bob", book, "Idempotency-Key", "storm")
	got := requireCreated(t, r.status, r.header, r.body, true)
	if order.ID != 0 {
		assert.Equal(t, order, got)
	}

	// The dedup window: one row without a dedup key, the repeat refused.
	r = post("/orders/quick", "carol", pen)
	requireCreated(t, r.status, r.header, r.body, false)
	r = post("/orders/quick", "carol", pen)
	requireProblem(t, r.status, r.header, r.body, http.StatusConflict, idemhttp.ProblemDuplicate)
	assert.Equal(t, 1, countRows(t, db, "SELECT count(*) FROM "+ordersTable+" WHERE user_id = 'carol' AND dedup_key IS NULL"))

	// A one-time token: the reuse replays, one row under the token.
	r = post("/tokens", "dave", "")
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	tok := strings.Split(strings.Split(string(r.body), `"token":"`)[1], `"`)[0]
	r = post("/orders/form", "dave", book, idemhttp.DefaultTokenHeader, tok)
	formOrder := requireCreated(t, r.status, r.header, r.body, false)
	r = post("/orders/form", "dave", book, idemhttp.DefaultTokenHeader, tok)
	assert.Equal(t, formOrder, requireCreated(t, r.status, r.header, r.body, true))
	assert.Equal(t, 1, orderRows(t, db, "dave", "token:"+tok))

	list := doHTTP(t, client, http.MethodGet, svc.url+"/orders", "alice", "")
	require.Equal(t, http.StatusOK, list.status)
	assert.JSONEq(t, `[{"id":`+itoa(first.ID)+`,"sku":"book","qty":1,"user":"alice"}]`, string(list.body))
	metrics := doHTTP(t, client, http.MethodGet, svc.url+"/metrics", "", "")
	require.Equal(t, http.StatusOK, metrics.status)
	assert.Contains(t, string(metrics.body), "idemkit_outcomes_total")
}

// failAtCommit makes every transaction that inserts into (or, for the
// store's table, updates to a completed record) table fail at COMMIT while the table
// idemdemo_test_fail holds a row: a deferred constraint trigger raises
// then, after every statement of the transaction succeeded.
func failAtCommit(t *testing.T, db *sql.DB, table, event string) (arm, disarm func()) {
	t.Helper()
	when := ""
	if table == sqlstore.DefaultTable {
		// Only the completion: the release that follows the failed
		// commit updates the row too, to a released record that keeps the
		// key's fencing token, and must go through.
		when = `WHEN (get_byte(NEW.idem_value, 1) = 3)`
	}
	for _, stmt := range []string{
		`CREATE TABLE idemdemo_test_fail (armed BOOLEAN)`,
		`CREATE FUNCTION idemdemo_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN
			IF EXISTS (SELECT 1 FROM idemdemo_test_fail) THEN
				RAISE EXCEPTION 'idemdemo test: commit refused';
			END IF;
			RETURN NULL;
		 END $$`,
		`CREATE CONSTRAINT TRIGGER idemdemo_test_fail AFTER ` + event + ` ON ` + table + `
		 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW ` + when + ` EXECUTE FUNCTION idemdemo_test_fail()`,
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	exec := func(stmt string) {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	return func() { exec("INSERT INTO idemdemo_test_fail VALUES (true)") },
		func() { exec("DELETE FROM idemdemo_test_fail") }
}

// The order and its idempotency record commit together. A COMMIT that
// fails after the order's INSERT and the record's completion (CompleteIn)
// both succeeded leaves no order and no record: the client gets a 500, the
// key is free, and its retry creates the order once. The failure is
// raised at COMMIT by the orders table, or by the store's table: in the
// second case an order committed on its own, before its record, would
// remain.
func TestPostgresOrderCommitsWithRecord(t *testing.T) {
	for name, trigger := range map[string]struct{ table, event string }{
		"order refused at commit":  {ordersTable, "INSERT"},
		"record refused at commit": {sqlstore.DefaultTable, "UPDATE"},
	} {
		t.Run(name, func(t *testing.T) {
			svc, db := startPgService(t, nil)
			arm, disarm := failAtCommit(t, db, trigger.table, trigger.event)
			client := &http.Client{Timeout: 20 * time.Second}
			post := func() httpResponse {
				return doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", "k1")
			}
			// Records other than released claims (state 7, kept for the
			// key's fencing token).
			records := func() int {
				return countRows(t, db, "SELECT count(*) FROM "+sqlstore.DefaultTable+" WHERE get_byte(idem_value, 1) <> 7")
			}

			arm()
			r := post()
			requireProblem(t, r.status, r.header, r.body, http.StatusInternalServerError, problemInternal)
			assert.Zero(t, countRows(t, db, "SELECT count(*) FROM "+ordersTable), "no order")
			assert.Zero(t, records(), "no record: not completed, and the claim was freed")

			disarm()
			r = post()
			first := requireCreated(t, r.status, r.header, r.body, false)
			assert.Equal(t, 1, orderRows(t, db, "alice", "key:k1"))
			assert.Equal(t, 1, records())
			r = post()
			assert.Equal(t, first, requireCreated(t, r.status, r.header, r.body, true))
			assert.Equal(t, 1, countRows(t, db, "SELECT count(*) FROM "+ordersTable))
		})
	}
}

// With a fallback store the orders stay in PostgreSQL but are committed on
// their own, before their records (a fallback's claim is not in the
// store's table); the banner says so, and orders are still made once.
func TestPostgresOrdersWithFallback(t *testing.T) {
	svc, db := startPgService(t, func(c *config) { c.stack.Fallback = "mem://" })
	assert.Contains(t, svc.backend.describe(), "orders in the PostgreSQL table idemdemo_orders (committed before their idempotency records: a fallback is set)")
	assert.Nil(t, svc.backend.txOrders)
	checkKeyMode(t, svc.url, "k1")
	assert.Equal(t, 1, orderRows(t, db, "alice", "key:k1"))
}

// The orders table survives a restart of the demo: the second start finds
// the table, the order and its unique index.
func TestPostgresOrdersPersist(t *testing.T) {
	storeURL, db := pgTestDatabase(t)
	cfg := defaultConfig()
	cfg.stack.Store = storeURL
	cfg.addr = "127.0.0.1:0"
	svc, err := start(context.Background(), cfg, discardLogger())
	require.NoError(t, err)
	first := checkKeyMode(t, svc.url, "k1")
	require.NoError(t, svc.shutdown(time.Second))

	svc = startTestService(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second}
	r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", "k1")
	assert.Equal(t, first, requireCreated(t, r.status, r.header, r.body, true))
	list := doHTTP(t, client, http.MethodGet, svc.url+"/orders", "alice", "")
	assert.JSONEq(t, `[{"id":`+itoa(first.ID)+`,"sku":"book","qty":1,"user":"alice"}]`, string(list.body))
	assert.Equal(t, 1, countRows(t, db, "SELECT count(*) FROM "+ordersTable))
}

// newPgTestApp is the service's handler over a fresh PostgreSQL database,
// built as the demo builds it, for the browser page's handler tests.
func newPgTestApp(t *testing.T) (*testApp, *sql.DB) {
	t.Helper()
	storeURL, db := pgTestDatabase(t)
	cfg := defaultConfig()
	cfg.stack.Store = storeURL
	be, err := openBackend(context.Background(), cfg, discardLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Close() })
	require.NotNil(t, be.txOrders)
	h, err := newApp(be, cfg, discardLogger())
	require.NoError(t, err)
	return &testApp{t: t, handler: h, orders: be.orders}, db
}

// The browser page's token form on PostgreSQL: the result page is recorded
// in the order's transaction and sent from the record, the first time as
// on a repeat (with its Content-Security-Policy both times); concurrent
// repeats make one row.
func TestPostgresUITokenForm(t *testing.T) {
	a, db := newPgTestApp(t)
	user := newDemoUser()
	tok := a.pageToken(user)
	first := a.uiPost(t.Context(), "/ui/orders/token", user, orderForm("teapot", tok))
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	require.Equal(t, "text/html; charset=utf-8", first.Header().Get("Content-Type"))
	require.Equal(t, "default-src 'self'", first.Header().Get("Content-Security-Policy"))
	require.Empty(t, first.Header().Get(idemhttp.ReplayedHeader))
	again := a.uiPost(t.Context(), "/ui/orders/token", user, orderForm("teapot", tok))
	require.Equal(t, http.StatusCreated, again.Code)
	require.Equal(t, "true", again.Header().Get(idemhttp.ReplayedHeader))
	require.Equal(t, "default-src 'self'", again.Header().Get("Content-Security-Policy"))
	require.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, 1, orderRows(t, db, user, "uitoken:"+tok))

	const n = 16
	form := orderForm("kettle", a.pageToken(user))
	form.Set("slow", "1")
	res := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i] = a.uiPost(t.Context(), "/ui/orders/token", user, form).Code })
	}
	wg.Wait()
	for _, code := range res {
		assert.Equal(t, http.StatusCreated, code)
	}
	assert.Equal(t, 1, orderRows(t, db, user, "uitoken:"+form.Get(uiTokenField)))

	// The unprotected form has no claim: its orders are made on their own.
	for range 2 {
		require.Equal(t, http.StatusCreated, a.uiPost(t.Context(), "/ui/orders/unprotected", user, orderForm("mug", "")).Code)
	}
	assert.Equal(t, 2, countRows(t, db, "SELECT count(*) FROM "+ordersTable+" WHERE user_id = $1 AND sku = 'mug'", user))
}
