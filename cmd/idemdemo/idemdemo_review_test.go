package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

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

// When a graceful shutdown times out, the requests still running are cut
// off, but the store must not close under them: shutdown waits until every
// handler has returned before it closes the backend.
func TestShutdownClosesStoreAfterHandlers(t *testing.T) {
	var closed atomic.Bool
	closerRan := make(chan struct{})
	be := &backend{closers: []func() error{func() error {
		closed.Store(true)
		close(closerRan)
		return nil
	}}}
	entered := make(chan struct{})
	var storeClosedUnderHandler atomic.Bool
	handlerDone := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		close(entered)
		<-r.Context().Done() // the connection is closed by the forced shutdown
		// Like a handler that still has to record its outcome: had the
		// backend been closed by now, this write would hit a closed store.
		select {
		case <-closerRan:
			storeClosedUnderHandler.Store(true)
		case <-time.After(time.Second):
		}
	})
	svc, err := listen("127.0.0.1:0", handler, be, discardLogger())
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(svc.url+"/", "text/plain", nil)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	err = svc.shutdown(10 * time.Millisecond) // shorter than the handler: forced
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, closed.Load(), "the backend is closed once shutdown returns")
	<-handlerDone
	assert.False(t, storeClosedUnderHandler.Load(), "the backend was closed while a handler was still running")
	<-done
}

// A body over the order routes' limit is 413, in every mode (token mode
// does not read the body in the middleware: the handler's limit applies).
func TestOrderBodyTooLarge(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	body := `{"sku":"` + strings.Repeat("x", maxOrderBody) + `","qty":1}`
	problem(t, a.post("/orders", "alice", body, "Idempotency-Key", "k1"), http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	problem(t, a.post("/orders/quick", "alice", body), http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	problem(t, a.post("/orders/form", "alice", body, "Idempotency-Token", a.issueToken("alice")), http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	// The oversized attempt was not stored under the key: the proper body runs.
	created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
	assert.Len(t, a.listOrders("alice"), 1)
}

// A request without a caller is 401 on every order route, whatever its
// test hooks say.
func TestUnauthenticatedBeforeHooks(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	for _, path := range []string{"/orders", "/orders/quick", "/orders/form"} {
		problem(t, a.post(path, "", book, "Idempotency-Key", "k1", delayHeader, "1h"), http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)
	}
}

// freePort returns a loopback address nothing listens on (for a store that
// does not answer).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// A request that reaches a server being shut down after its handlers were
// drained is refused, not run against a closing store.
func TestGateRefusesAfterClose(t *testing.T) {
	var g handlerGate
	ran := false
	h := g.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	g.closeAndWait()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders", nil))
	assert.False(t, ran)
	problem(t, w, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
}

// closeAndWait returns only once every admitted handler returned.
func TestGateWaitsForAll(t *testing.T) {
	const handlers = 8
	var g handlerGate
	var running atomic.Int32
	entered := make(chan struct{}, handlers)
	release := make(chan struct{})
	h := g.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		running.Add(1)
		entered <- struct{}{}
		<-release
		running.Add(-1)
	}))
	var wg sync.WaitGroup
	for range handlers {
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil)) })
	}
	for range handlers {
		<-entered
	}
	waited := make(chan int32)
	go func() {
		g.closeAndWait()
		waited <- running.Load()
	}()
	// Once the gate is closed (closeAndWait is waiting, or returned too
	// early), release the handlers.
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.closed
	}, 10*time.Second, time.Millisecond)
	close(release)
	assert.Zero(t, <-waited, "closeAndWait returned with handlers running")
	wg.Wait()
}
