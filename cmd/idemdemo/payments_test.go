package main

import (
	"net/http"
	"sync"
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

// The provider charges once per key, replays a repeat, refuses a fencing
// token lower than the highest seen for the key (409, nothing charged) and
// a malformed one (400), and counts it all on GET /charges.
func TestProviderFencesAndCountsCharges(t *testing.T) {
	h, err := newProviderHandler(testkit.NewMem(t), discardLogger())
	require.NoError(t, err)
	p := &testApp{t: t, handler: h}
	body := `{"amount_cents":2400,"order":1}`
	w := p.post("/charges", "", body, "Idempotency-Key", `"k1"`, idemhttp.FenceHeader, "5")
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	assert.JSONEq(t, `{"id":"ch_1","amount_cents":2400,"order":1}`, w.Body.String())
	w = p.post("/charges", "", body, "Idempotency-Key", `"k1"`, idemhttp.FenceHeader, "6")
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get(idemhttp.ReplayedHeader))
	problem(t, p.post("/charges", "", body, "Idempotency-Key", `"k1"`, idemhttp.FenceHeader, "5"), http.StatusConflict, problemStaleFence)
	problem(t, p.post("/charges", "", body, "Idempotency-Key", `"k2"`, idemhttp.FenceHeader, "x"), http.StatusBadRequest, problemMalformedFence)
	w = p.post("/charges", "", body, "Idempotency-Key", `"k2"`, idemhttp.FenceHeader, "1")
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	w = p.get("/charges", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"calls":3,"charges":2,"keys":2,"double_charged":0,"stale_fences":1,"ids":["ch_1","ch_2"]}`, w.Body.String())
}

// Concurrent reservations of one key make one order, and every caller
// gets it; concurrent payments of it agree on the first charge.
func TestKVPaymentsReserveRace(t *testing.T) {
	r := &kvPayments{st: testkit.NewMem(t)}
	const n = 16
	var wg sync.WaitGroup
	got := make([]PaidOrder, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = r.Reserve(t.Context(), PaidOrder{SKU: "book", Qty: 1, User: "alice", Status: statusReserved}, "paid:k")
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, got[0], got[i])
	}
	orders, err := r.List(t.Context(), "alice")
	require.NoError(t, err)
	assert.Len(t, orders, 1, "one winner")
	_, err = r.Reserve(t.Context(), PaidOrder{SKU: "pen", Qty: 1, User: "alice"}, "paid:k")
	assert.ErrorIs(t, err, errKeyReused)
	paid, err := r.MarkPaid(t.Context(), got[0], "ch_1")
	require.NoError(t, err)
	assert.Equal(t, statusPaid, paid.Status)
	again, err := r.MarkPaid(t.Context(), got[0], "ch_1")
	require.NoError(t, err)
	assert.Equal(t, paid, again)
	_, err = r.MarkPaid(t.Context(), got[0], "ch_2")
	assert.Error(t, err, "paid by another charge")
}
