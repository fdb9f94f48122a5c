package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// testApp is the service's handler over a given store, with in-memory
// orders, for handler tests.
type testApp struct {
	t       *testing.T
	handler http.Handler
	orders  orderRepo
}

// newTestApp builds the handler over st (a fresh memstore when nil) with a
// dedup window of window and the engine options opts.
func newTestApp(t *testing.T, st store.Store, window time.Duration, opts ...idemkit.Option) *testApp {
	t.Helper()
	if st == nil {
		mem := testkit.NewMem(t)
		t.Cleanup(func() { _ = mem.Close() })
		st = mem
	}
	e, err := idemkit.New(st, append([]idemkit.Option{idemkit.WithObserver(nil)}, opts...)...)
	require.NoError(t, err)
	orders := newMemoryOrders(maxMemoryOrders, maxMemoryOrdersPerUser)
	h, err := newHandler(e, orders, window, discardLogger())
	require.NoError(t, err)
	return &testApp{t: t, handler: h, orders: orders}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// post sends POST path as user ("" for none) with body and header pairs.
func (a *testApp) post(path, user, body string, header ...string) *httptest.ResponseRecorder {
	return a.postCtx(context.Background(), path, user, body, header...)
}

func (a *testApp) postCtx(ctx context.Context, path, user, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	return a.serve(r, user, header)
}

// get sends GET path as user.
func (a *testApp) get(path, user string) *httptest.ResponseRecorder {
	return a.serve(httptest.NewRequest(http.MethodGet, path, nil), user, nil)
}

func (a *testApp) serve(r *http.Request, user string, header []string) *httptest.ResponseRecorder {
	if user != "" {
		r.Header.Set(userHeader, user)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	a.handler.ServeHTTP(w, r)
	return w
}

// issueToken gets a token for user from POST /tokens.
func (a *testApp) issueToken(user string) string {
	w := a.post("/tokens", user, "")
	require.Equal(a.t, http.StatusCreated, w.Code, w.Body.String())
	var tok idemhttp.IssuedToken
	require.NoError(a.t, json.Unmarshal(w.Body.Bytes(), &tok))
	return tok.Token
}

// listOrders returns user's orders from GET /orders.
func (a *testApp) listOrders(user string) []Order {
	w := a.get("/orders", user)
	require.Equal(a.t, http.StatusOK, w.Code, w.Body.String())
	var orders []Order
	require.NoError(a.t, json.Unmarshal(w.Body.Bytes(), &orders))
	return orders
}

// requireCreated checks a fresh or replayed 201 and returns its order.
func requireCreated(t *testing.T, status int, header http.Header, body []byte, replayed bool) Order {
	t.Helper()
	require.Equal(t, http.StatusCreated, status, string(body))
	require.Equal(t, "application/json", header.Get("Content-Type"))
	want := ""
	if replayed {
		want = "true"
	}
	require.Equal(t, want, header.Get(idemhttp.ReplayedHeader), "Idempotent-Replayed")
	var o Order
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&o))
	require.NotZero(t, o.ID)
	require.Equal(t, "/orders/"+itoa(o.ID), header.Get("Location"))
	return o
}

// requireProblem checks a problem+json answer of the given status and type.
func requireProblem(t *testing.T, status int, header http.Header, body []byte, wantStatus int, wantType string) idemhttp.Problem {
	t.Helper()
	require.Equal(t, wantStatus, status, string(body))
	require.Equal(t, idemhttp.ProblemContentType, header.Get("Content-Type"))
	var p idemhttp.Problem
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, wantType, p.Type)
	require.Equal(t, wantStatus, p.Status)
	return p
}

func created(t *testing.T, w *httptest.ResponseRecorder, replayed bool) Order {
	t.Helper()
	return requireCreated(t, w.Code, w.Header(), w.Body.Bytes(), replayed)
}

func problem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) idemhttp.Problem {
	t.Helper()
	return requireProblem(t, w.Code, w.Header(), w.Body.Bytes(), status, typ)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// syncBuffer is a bytes.Buffer safe for concurrent use, for output that a
// goroutine writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// httpResponse is a response read whole.
type httpResponse struct {
	status int
	header http.Header
	body   []byte
}

// doHTTP sends a request over real HTTP and reads the whole answer.
func doHTTP(t *testing.T, client *http.Client, method, url, user, body string, header ...string) httpResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResponse{status: resp.StatusCode, header: resp.Header, body: b}
}
