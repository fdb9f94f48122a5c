package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// The storm subcommand, in-process: exactly one order per logical
// submission in every mode, over either store.
func TestStormInProcess(t *testing.T) {
	for _, storeURL := range []string{"", "mem://"} {
		t.Run("store="+storeURL, func(t *testing.T) {
			var stdout, stderr syncBuffer
			err := run(context.Background(), []string{"storm", "-n", "30", "-users", "4", "-store", storeURL}, &stdout, &stderr)
			require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
			out := stdout.String()
			for _, mode := range []string{"idempotency-key", "window", "token"} {
				assert.Contains(t, out, mode+": ok, one order per submission")
			}
			assert.Contains(t, out, "submissions  sent  orders  fresh 201  replays  409  other 4xx  errors")
		})
	}
}

// Every mode's tally adds up: each submission ran once, every other copy was
// replayed or refused with 409.
func TestStormTallies(t *testing.T) {
	cfg := defaultConfig()
	cfg.stack.Store = "mem://"
	svc := startTestService(t, cfg)
	const users, copies = 3, 25
	results, err := storm(context.Background(), stormConfig{baseURL: svc.url, copies: copies, users: users})
	require.NoError(t, err)
	require.Len(t, results, len(stormModes))
	for i, r := range results {
		assert.Equal(t, stormModes[i].name, r.mode)
		assert.Equal(t, users, r.submissions, r.mode)
		assert.Equal(t, users*copies, r.sent, r.mode)
		assert.Equal(t, users, r.orders, r.mode)
		assert.Equal(t, users, r.fresh, r.mode)
		assert.Equal(t, r.sent, r.fresh+r.replays+r.conflicts, r.mode)
		assert.Zero(t, r.rejections, r.mode)
		assert.Zero(t, r.errors, r.mode)
		assert.Positive(t, r.p50, r.mode)
		assert.LessOrEqual(t, r.p50, r.p99, r.mode)
		assert.True(t, r.ok())
	}
	assert.Zero(t, results[1].replays, "a window never replays")
	require.NoError(t, checkStormResults(results))
}

// Storms against one server do not count each other's orders.
func TestStormRepeated(t *testing.T) {
	cfg := defaultConfig()
	cfg.stack.Store = "mem://"
	svc := startTestService(t, cfg)
	for range 2 {
		results, err := storm(context.Background(), stormConfig{baseURL: svc.url, copies: 5, users: 2})
		require.NoError(t, err)
		require.NoError(t, checkStormResults(results))
	}
}

// unguardedServer serves the demo's routes with no idemkit middleware at
// all: orders are created by every request, with the order repository's
// unique index keyed by keyOf on /orders and tokenKey on /orders/form (pass
// noDedupKey for no index). Tokens are still issued, so the storm can run.
func unguardedServer(t *testing.T, keyOf, tokenKey func(*http.Request) string) *httptest.Server {
	t.Helper()
	mem := testkit.NewMem(t)
	t.Cleanup(func() { _ = mem.Close() })
	e, err := idemkit.New(mem, idemkit.WithObserver(nil))
	require.NoError(t, err)
	s := &server{engine: e, orders: newMemoryOrders(maxMemoryOrders, maxMemoryOrdersPerUser), principal: idemhttp.TrustedHeaderPrincipal(userHeader), log: discardLogger()}
	issuer, err := idemhttp.TokenIssuer(e, idemhttp.WithPrincipal(s.principal))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /orders", s.createOrder(keyOf))
	mux.Handle("POST /orders/quick", s.createOrder(noDedupKey))
	mux.Handle("POST /orders/form", s.createOrder(tokenKey))
	mux.Handle("POST /tokens", issuer)
	mux.HandleFunc("GET /orders", s.listOrders)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// A storm against a service without idempotency middleware reports the
// duplicates it makes: the storm can fail.
func TestStormDetectsDuplicates(t *testing.T) {
	srv := unguardedServer(t, noDedupKey, noDedupKey)

	results, err := storm(context.Background(), stormConfig{baseURL: srv.URL, copies: 4, users: 2})
	require.NoError(t, err)
	for _, r := range results {
		assert.Equal(t, 8, r.orders, r.mode)
		assert.False(t, r.ok(), r.mode)
	}
	require.ErrorContains(t, checkStormResults(results), "8 orders for 2 submissions")
	var out syncBuffer
	printStormResults(&out, results)
	assert.Contains(t, out.String(), "idempotency-key: FAIL, 8 orders for 2 submissions")
}

func TestStormServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	_, err := storm(context.Background(), stormConfig{baseURL: srv.URL, copies: 2, users: 1})
	require.Error(t, err)
}

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, v := range n {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	assert.Zero(t, percentile(nil, 50))
	assert.Equal(t, 7*time.Millisecond, percentile(ms(7), 99))
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	assert.Equal(t, 50*time.Millisecond, percentile(ms(hundred...), 50))
	assert.Equal(t, 99*time.Millisecond, percentile(ms(hundred...), 99))
	assert.Equal(t, 2*time.Millisecond, percentile(ms(1, 2, 3), 50))
	assert.Equal(t, 3*time.Millisecond, percentile(ms(1, 2, 3), 99))
}

func TestCheckLoopbackURL(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "http://127.1.2.3"} {
		assert.NoError(t, checkLoopbackURL(ok), ok)
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://example.com", "https://127.0.0.1", "127.0.0.1:8080", "http://", "::"} {
		assert.Error(t, checkLoopbackURL(bad), bad)
	}
}

func TestStormTableFormat(t *testing.T) {
	var out syncBuffer
	printStormResults(&out, []stormResult{{mode: "token", submissions: 1, sent: 3, orders: 1, fresh: 1, replays: 2,
		p50: 1234567 * time.Nanosecond, p99: 2 * time.Second}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^\s*token\s+1\s+3\s+1\s+1\s+2\s+0\s+0\s+0\s+1\.23ms\s+2s$`, lines[1])
	assert.Equal(t, "token: ok, one order per submission", lines[2])
}

// lopsidedServer is an order service whose duplicates balance out: the first
// user's submission makes an order per copy, the second user's none (503).
// Every mode sees as many orders as submissions in total, with one
// submission duplicated and one lost.
func lopsidedServer(t *testing.T) *httptest.Server {
	t.Helper()
	orders := newMemoryOrders(maxMemoryOrders, maxMemoryOrdersPerUser)
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get(userHeader)
		if !strings.HasSuffix(user, "user1") {
			writeProblem(w, http.StatusServiceUnavailable, problemInternal, "down")
			return
		}
		var req orderRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeProblem(w, http.StatusBadRequest, problemInvalidBody, err.Error())
			return
		}
		o, _, err := orders.Create(r.Context(), Order{SKU: req.SKU, Qty: req.Qty, User: user}, "")
		require.NoError(t, err)
		writeJSON(w, http.StatusCreated, o)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", create)
	mux.Handle("POST /orders/quick", create)
	mux.Handle("POST /orders/form", create)
	mux.HandleFunc("POST /tokens", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusCreated, idemhttp.IssuedToken{Token: "t", ExpiresIn: 60})
	})
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		list, err := orders.List(r.Context(), r.Header.Get(userHeader))
		require.NoError(t, err)
		writeJSON(w, http.StatusOK, list)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// The storm checks each submission, not the sum: two orders for one
// submission and none for another is a failure, not "one per submission".
func TestStormCountsPerSubmission(t *testing.T) {
	srv := lopsidedServer(t)
	results, err := storm(context.Background(), stormConfig{baseURL: srv.URL, copies: 2, users: 2})
	require.NoError(t, err)
	require.Len(t, results, len(stormModes))
	for _, r := range results {
		assert.Equal(t, 2, r.orders, r.mode)
		assert.False(t, r.ok(), "%s: one submission duplicated and one lost", r.mode)
	}
	require.Error(t, checkStormResults(results))
	var out syncBuffer
	printStormResults(&out, results)
	assert.NotContains(t, out.String(), "ok, one order per submission")
}

// Without the idempotency middleware, the order repository's unique index
// still makes one order per key or token, but every copy runs the handler
// and answers a fresh 201. The storm must not call that a success: it
// proves nothing about the idempotency layer.
func TestStormDetectsHandlerReruns(t *testing.T) {
	srv := unguardedServer(t, idempotencyKeyOf, tokenOf)

	results, err := storm(context.Background(), stormConfig{baseURL: srv.URL, copies: 4, users: 2})
	require.NoError(t, err)
	byMode := map[string]stormResult{}
	for _, r := range results {
		byMode[r.mode] = r
	}
	for _, mode := range []string{"idempotency-key", "token"} {
		r := byMode[mode]
		assert.Equal(t, 2, r.orders, "%s: the unique index kept one order per submission", mode)
		assert.Equal(t, 8, r.fresh, "%s: every copy ran the handler", mode)
		assert.False(t, r.ok(), "%s: the handler ran more than once per submission", mode)
	}
	require.Error(t, checkStormResults(results))
}

// The storm's help says that it does not read IDEMKIT_STORE (nor the other
// IDEMKIT_* variables): its in-process server uses -store or a temporary
// bbolt file, so a storm never writes into the service's real store.
func TestStormHelpSaysItIgnoresTheStoreVariable(t *testing.T) {
	var stderr bytes.Buffer
	_, _, err := parseStormFlags([]string{"-h"}, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	help := stderr.String()
	assert.Contains(t, help, "IDEMKIT_STORE")
	assert.Contains(t, help, "ignored")
}
