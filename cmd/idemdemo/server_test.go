package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

const (
	book = `{"sku":"book","qty":1}`
	pen  = `{"sku":"pen","qty":2}`
)

func TestCreateOrderReplays(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	first := created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
	assert.Equal(t, Order{ID: first.ID, SKU: "book", Qty: 1, User: "alice"}, first)

	w := a.post("/orders", "alice", book, "Idempotency-Key", "k1")
	assert.Equal(t, first, created(t, w, true))
	assert.Equal(t, []Order{first}, a.listOrders("alice"))

	// The same key from another user is another order.
	bobs := created(t, a.post("/orders", "bob", book, "Idempotency-Key", "k1"), false)
	assert.NotEqual(t, first.ID, bobs.ID)
}

// Both spellings of a key header (an sf-string and a bare token) name the
// same key.
func TestCreateOrderKeySpellings(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	first := created(t, a.post("/orders", "alice", book, "Idempotency-Key", `"k-1"`), false)
	assert.Equal(t, first, created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k-1"), true))
}

func TestHeaderKey(t *testing.T) {
	for in, want := range map[string]string{
		`abc`:         "abc",
		` abc `:       "abc",
		`"abc"`:       "abc",
		`"a\"b\\c"`:   `a"b\c`,
		`"unfinished`: `"unfinished`,
	} {
		assert.Equal(t, want, headerKey(in), in)
	}
}

// A duplicate that arrives while the first request runs gets 409 with
// Retry-After; once the first fails (here: cancelled), the key is free.
func TestCreateOrderInFlight(t *testing.T) {
	admitted := make(chan struct{}, 1)
	a := newTestApp(t, nil, time.Second, idemkit.WithObserver(idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventAdmitted && ev.Mode == idemkit.ModeDo {
			select {
			case admitted <- struct{}{}:
			default:
			}
		}
	})))
	ctx, cancel := context.WithCancel(context.Background())
	firstDone := make(chan int)
	go func() {
		firstDone <- a.postCtx(ctx, "/orders", "alice", book, "Idempotency-Key", "k1", delayHeader, "5s").Code
	}()
	<-admitted

	w := a.post("/orders", "alice", book, "Idempotency-Key", "k1")
	problem(t, w, http.StatusConflict, idemhttp.ProblemInProgress)
	assert.NotEmpty(t, w.Header().Get("Retry-After"))

	cancel()
	assert.Equal(t, http.StatusServiceUnavailable, <-firstDone)
	assert.Empty(t, a.listOrders("alice"), "the cancelled request created nothing")
	created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
}

func TestCreateOrderMismatch(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
	problem(t, a.post("/orders", "alice", pen, "Idempotency-Key", "k1"), http.StatusUnprocessableEntity, idemhttp.ProblemKeyMismatch)
	assert.Len(t, a.listOrders("alice"), 1)
}

func TestCreateOrderKeyRequired(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	problem(t, a.post("/orders", "alice", book), http.StatusBadRequest, idemhttp.ProblemKeyMissing)
	problem(t, a.post("/orders", "alice", book, "Idempotency-Key", "has space"), http.StatusBadRequest, idemhttp.ProblemKeyInvalid)
	assert.Empty(t, a.listOrders("alice"))
}

func TestCreateOrderInvalidBody(t *testing.T) {
	bodies := map[string]string{
		"not JSON":      `sku=book`,
		"empty":         ``,
		"null":          `null`,
		"array":         `[{"sku":"book","qty":1}]`,
		"unknown field": `{"sku":"book","qty":1,"price":3}`,
		"qty string":    `{"sku":"book","qty":"1"}`,
		"qty fraction":  `{"sku":"book","qty":1.5}`,
		"qty zero":      `{"sku":"book","qty":0}`,
		"qty negative":  `{"sku":"book","qty":-1}`,
		"qty missing":   `{"sku":"book"}`,
		"sku empty":     `{"sku":"","qty":1}`,
		"sku number":    `{"sku":7,"qty":1}`,
		"sku NUL":       `{"sku":"bo\u0000ok","qty":1}`,
		"two objects":   `{"sku":"book","qty":1}{"sku":"book","qty":1}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			a := newTestApp(t, nil, time.Second)
			problem(t, a.post("/orders", "alice", body, "Idempotency-Key", "k1"), http.StatusBadRequest, problemInvalidBody)
			problem(t, a.post("/orders/quick", "alice", body), http.StatusBadRequest, problemInvalidBody)
			problem(t, a.post("/orders/form", "alice", body, "Idempotency-Token", a.issueToken("alice")), http.StatusBadRequest, problemInvalidBody)
			assert.Empty(t, a.listOrders("alice"))
		})
	}
}

// A malformed hook is refused before the idempotency middleware, so it
// neither spends nor stores the key.
func TestCreateOrderInvalidHooks(t *testing.T) {
	hooks := [][2]string{
		{delayHeader, "6s"}, {delayHeader, "soon"}, {delayHeader, "-1s"},
		{stallHeader, "1h"}, {failHeader, "404"}, {failHeader, "yes"},
	}
	a := newTestApp(t, nil, time.Second)
	for _, h := range hooks {
		problem(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1", h[0], h[1]), http.StatusBadRequest, problemInvalidHook)
	}
	created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
}

// Test-hook headers are not part of the fingerprint: the same request with
// other hooks is a retry, not a different payload.
func TestHooksNotInFingerprint(t *testing.T) {
	a := newTestApp(t, nil, time.Minute)
	first := created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1", stallHeader, "1ms"), false)
	assert.Equal(t, first, created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1", delayHeader, "1ms"), true))

	created(t, a.post("/orders/quick", "alice", book, delayHeader, "1ms"), false)
	problem(t, a.post("/orders/quick", "alice", book, stallHeader, "1ms"), http.StatusConflict, idemhttp.ProblemDuplicate)
}

// X-Demo-Fail: 500 creates nothing, is not stored, and a retry runs.
func TestDemoFailThenRetry(t *testing.T) {
	a := newTestApp(t, nil, time.Minute)
	problem(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1", failHeader, "500"), http.StatusInternalServerError, problemDemoFailure)
	assert.Empty(t, a.listOrders("alice"))
	created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)

	// The window route releases its claim on a failure.
	problem(t, a.post("/orders/quick", "alice", pen, failHeader, "500"), http.StatusInternalServerError, problemDemoFailure)
	created(t, a.post("/orders/quick", "alice", pen), false)

	// A token whose first use failed is spent without a stored outcome.
	tok := a.issueToken("alice")
	problem(t, a.post("/orders/form", "alice", book, "Idempotency-Token", tok, failHeader, "500"), http.StatusInternalServerError, problemDemoFailure)
	problem(t, a.post("/orders/form", "alice", book, "Idempotency-Token", tok), http.StatusConflict, idemhttp.ProblemTokenUsed)
	assert.Len(t, a.listOrders("alice"), 2)
}

// The last line of defence: a first attempt created the order and crashed
// before its idempotency record completed; once that record is gone, the
// retry runs the handler again, which finds the order through the unique
// index instead of creating a second one.
func TestUniqueIndexAfterCrash(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	orphan, _, err := a.orders.Create(context.Background(), Order{SKU: "book", Qty: 1, User: "alice"}, "key:k1")
	require.NoError(t, err)

	w := a.post("/orders", "alice", book, "Idempotency-Key", "k1")
	assert.Equal(t, orphan, created(t, w, false), "the handler ran and answered with the existing order")
	assert.Equal(t, []Order{orphan}, a.listOrders("alice"))

	// A retry of that key with another order is refused by the index.
	_, _, err = a.orders.Create(context.Background(), Order{SKU: "book", Qty: 1, User: "alice"}, "key:k2")
	require.NoError(t, err)
	problem(t, a.post("/orders", "alice", pen, "Idempotency-Key", "k2"), http.StatusUnprocessableEntity, problemKeyReused)
}

func TestQuickWindow(t *testing.T) {
	a := newTestApp(t, nil, 3*time.Second)
	first := created(t, a.post("/orders/quick", "alice", book), false)
	w := a.post("/orders/quick", "alice", `{ "qty": 1, "sku": "book" }`)
	problem(t, w, http.StatusConflict, idemhttp.ProblemDuplicate)
	assert.Equal(t, "3", w.Header().Get("Retry-After"))

	second := created(t, a.post("/orders/quick", "alice", pen), false)
	bobs := created(t, a.post("/orders/quick", "bob", book), false)
	assert.Equal(t, []Order{first, second}, a.listOrders("alice"))
	assert.Equal(t, []Order{bobs}, a.listOrders("bob"))
}

func TestQuickWindowEnds(t *testing.T) {
	a := newTestApp(t, nil, 20*time.Millisecond)
	created(t, a.post("/orders/quick", "alice", book), false)
	require.Eventually(t, func() bool {
		return a.post("/orders/quick", "alice", book).Code == http.StatusCreated
	}, 10*time.Second, 5*time.Millisecond)
	assert.Len(t, a.listOrders("alice"), 2)
}

func TestTokens(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	w := a.post("/tokens", "alice", "")
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	var issued map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &issued))
	assert.EqualValues(t, 600, issued["expires_in"])
	tok, _ := issued["token"].(string)
	require.NotEmpty(t, tok)

	first := created(t, a.post("/orders/form", "alice", book, "Idempotency-Token", tok), false)
	assert.Equal(t, first, created(t, a.post("/orders/form", "alice", book, "Idempotency-Token", tok), true))

	problem(t, a.post("/orders/form", "alice", book), http.StatusBadRequest, idemhttp.ProblemTokenMissing)
	problem(t, a.post("/orders/form", "alice", book, "Idempotency-Token", "forged-0123456789abcdef"), http.StatusBadRequest, idemhttp.ProblemTokenInvalid)
	problem(t, a.post("/orders/form", "bob", book, "Idempotency-Token", a.issueToken("alice")), http.StatusBadRequest, idemhttp.ProblemTokenInvalid)
	assert.Equal(t, []Order{first}, a.listOrders("alice"))
	assert.Empty(t, a.listOrders("bob"))
}

func TestUnauthenticated(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	for _, path := range []string{"/orders", "/orders/quick", "/orders/form", "/tokens"} {
		problem(t, a.post(path, "", book, "Idempotency-Key", "k1", "Idempotency-Token", "t"), http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)
	}
	problem(t, a.get("/orders", ""), http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)
}

func TestListOrders(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	w := a.get("/orders", "alice")
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `[]`, w.Body.String())

	o1 := created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
	created(t, a.post("/orders", "bob", book, "Idempotency-Key", "k1"), false)
	o2 := created(t, a.post("/orders/quick", "alice", pen), false)
	assert.Equal(t, []Order{o1, o2}, a.listOrders("alice"))
}

func TestHealthz(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		mem := testkit.NewMem(t)
		a := newTestApp(t, mem, time.Second)
		w := a.get("/healthz", "")
		require.Equal(t, http.StatusOK, w.Code)
		assert.JSONEq(t, `{"status":"ok"}`, w.Body.String())
		require.NoError(t, mem.Close())
		w = a.get("/healthz", "")
		problem(t, w, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
		assert.Equal(t, "1", w.Header().Get("Retry-After"))
	})
	t.Run("bolt", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.stack.Store = "bolt://" + filepath.Join(t.TempDir(), "demo.db")
		be, err := openBackend(context.Background(), cfg, discardLogger())
		require.NoError(t, err)
		a := newTestApp(t, be.store, time.Second)
		require.Equal(t, http.StatusOK, a.get("/healthz", "").Code)
		require.NoError(t, be.Close())
		problem(t, a.get("/healthz", ""), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	})
}

// With the store down, fail-closed refuses orders and fail-open creates
// them unguarded.
func TestStoreDown(t *testing.T) {
	down := testkit.NewMem(t)
	require.NoError(t, down.Close())

	closed := newTestApp(t, down, time.Second)
	problem(t, closed.post("/orders", "alice", book, "Idempotency-Key", "k1"), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	problem(t, closed.post("/orders/quick", "alice", book), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	problem(t, closed.post("/tokens", "alice", ""), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	assert.Empty(t, closed.listOrders("alice"))

	open := newTestApp(t, down, time.Second, idemkit.WithFailureMode(idemkit.FailOpen))
	created(t, open.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
	created(t, open.post("/orders/quick", "alice", book), false)
	// Unguarded, the unique index still stops the repeat of the key.
	again := created(t, open.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)
	assert.Len(t, open.listOrders("alice"), 2)
	assert.Equal(t, "book", again.SKU)
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
