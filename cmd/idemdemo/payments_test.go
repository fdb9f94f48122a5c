package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// Without -provider POST /orders/paid answers 503 and creates nothing;
// the crash hooks are refused without -crash-hooks, and checked with it,
// before the store is touched.
func TestPaidOrdersRefusals(t *testing.T) {
	a := newTestApp(t, nil, time.Second)
	problem(t, a.post("/orders/paid", "alice", book, "Idempotency-Key", "p1"), http.StatusServiceUnavailable, problemPaymentsOff)
	problem(t, a.post("/orders/paid", "alice", book, "Idempotency-Key", "p1", pauseAfterHeader, "charge"), http.StatusBadRequest, problemCrashHooksOff)
	problem(t, a.post("/orders/paid", "alice", book), http.StatusBadRequest, idemhttp.ProblemKeyMissing)
	w := a.get("/orders/paid", "alice")
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `[]`, w.Body.String())

	st := testkit.NewMem(t)
	e, err := idemkit.New(st, idemkit.WithObserver(nil))
	require.NoError(t, err)
	pay, err := newPayments(&kvPayments{st: st}, "http://127.0.0.1:1", true, discardLogger())
	require.NoError(t, err)
	h, err := newTxHandler(e, newMemoryOrders(10, 10), nil, pay, time.Second, discardLogger())
	require.NoError(t, err)
	hooked := &testApp{t: t, handler: h}
	problem(t, hooked.post("/orders/paid", "alice", book, "Idempotency-Key", "p1", pauseAfterHeader, "later"), http.StatusBadRequest, problemInvalidHook)
	problem(t, hooked.post("/orders/paid", "alice", book, "Idempotency-Key", "p1", pauseAfterHeader, "reserve", pauseForHeader, "1m"), http.StatusBadRequest, problemInvalidHook)
	// The provider does not answer: 500 after the reservation, not
	// recorded, so a retry resumes at the charge.
	problem(t, hooked.post("/orders/paid", "alice", book, "Idempotency-Key", "p1"), http.StatusInternalServerError, problemInternal)
	orders, err := pay.repo.List(t.Context(), "alice")
	require.NoError(t, err)
	assert.Equal(t, []PaidOrder{{ID: 1, SKU: "book", Qty: 1, User: "alice", Status: statusReserved}}, orders)
}
