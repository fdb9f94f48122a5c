package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// orderHandler places an order in a transaction that completes the
// idempotency record: it commits unless failCommit says otherwise, and
// then writes only an error.
func orderHandler(t *testing.T, s store.Store, commits *atomic.Int32, failCommit func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tx := storetest.NewTx(s)
		h := http.Header{"Location": {"/orders/1"}, "Content-Type": {"application/json"}, "X-Not-Stored": {"1"}}
		if err := idemhttp.CompleteIn(r, tx, http.StatusCreated, h, []byte(`{"order":1}`)); err != nil {
			http.Error(w, "conflict", http.StatusConflict)
			return
		}
		if failCommit() {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		tx.Commit()
		commits.Add(1)
	}
}

func TestCompleteInSendsTheCommittedResponse(t *testing.T) {
	s := testkit.NewMem(t)
	var commits atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngineOn(t, s), byUser))
	h := mw(orderHandler(t, s, &commits, func() bool { return false }))

	first := serve(h, req{user: "u1", key: "k1", body: `{"sku":"A"}`})
	require.Equal(t, http.StatusCreated, first.Code)
	assert.Equal(t, `{"order":1}`, first.Body.String())
	assert.Equal(t, "/orders/1", first.Header().Get("Location"))
	assert.Equal(t, "application/json", first.Header().Get("Content-Type"))
	assert.Empty(t, first.Header().Get("X-Not-Stored"), "only allow-listed headers are recorded and sent")
	assert.False(t, isReplay(first))

	again := serve(h, req{user: "u1", key: "k1", body: `{"sku":"A"}`})
	require.Equal(t, http.StatusCreated, again.Code)
	assert.True(t, isReplay(again))
	assert.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, first.Header().Get("Location"), again.Header().Get("Location"))
	assert.Equal(t, int32(1), commits.Load())
}

func TestCompleteInRolledBackSendsTheHandlersAnswerAndFreesTheKey(t *testing.T) {
	s := testkit.NewMem(t)
	var commits atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngineOn(t, s), byUser))
	h := mw(orderHandler(t, s, &commits, fail.Load))

	w := serve(h, req{user: "u1", key: "k1", body: `{"sku":"A"}`})
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), "database unavailable")
	assert.False(t, isReplay(w))

	fail.Store(false)
	w = serve(h, req{user: "u1", key: "k1", body: `{"sku":"A"}`})
	require.Equal(t, http.StatusCreated, w.Code, "after a rollback a retry runs the handler")
	assert.False(t, isReplay(w))
	assert.Equal(t, int32(1), commits.Load())
}

func TestCompleteInRefusesWhatItCannotRecord(t *testing.T) {
	s := testkit.NewMem(t)
	r := httptest.NewRequest(http.MethodPost, "/orders", nil)
	err := idemhttp.CompleteIn(r, s, http.StatusCreated, nil, nil)
	require.ErrorIs(t, err, idemkit.ErrInvalid, "outside the middleware")

	var got []error
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngineOn(t, s), byUser,
		idemhttp.WithStorePolicy(func(status int) bool { return status < 500 })))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := storetest.NewTx(s)
		got = append(got,
			idemhttp.CompleteIn(r, tx, 42, nil, nil),
			idemhttp.CompleteIn(r, tx, http.StatusBadGateway, nil, nil),
			idemhttp.CompleteIn(r, tx, http.StatusOK, nil, make([]byte, idemhttp.DefaultMaxStoredResponse+1)))
		w.WriteHeader(http.StatusTeapot)
	}))
	w := serve(h, req{user: "u1", key: "k1"})
	assert.Equal(t, http.StatusTeapot, w.Code)
	require.Len(t, got, 3)
	assert.ErrorIs(t, got[0], idemkit.ErrInvalid, "invalid status")
	assert.ErrorIs(t, got[1], idemkit.ErrInvalid, "a status the route does not store")
	assert.ErrorIs(t, got[2], idemkit.ErrResultTooLarge)
}

// TestCompleteInRace sends one key many times at once: one handler
// commits, and every request (waiting, WithWait) gets its response.
func TestCompleteInRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := testkit.NewMem(t)
		var commits, runs atomic.Int32
		mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngineOn(t, s), byUser,
			idemhttp.WithEngineOptions(idemkit.WithWait(10*time.Millisecond))))
		inner := orderHandler(t, s, &commits, func() bool { return false })
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			time.Sleep(5 * time.Millisecond)
			inner(w, r)
		}))
		var wg sync.WaitGroup
		codes := make([]int, 48)
		bodies := make([]string, len(codes))
		for i := range codes {
			wg.Go(func() {
				w := serve(h, req{user: "u1", key: "k1", body: `{"sku":"A"}`})
				codes[i], bodies[i] = w.Code, w.Body.String()
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), runs.Load(), "handler runs")
		assert.Equal(t, int32(1), commits.Load(), "commits")
		for i := range codes {
			assert.Equal(t, http.StatusCreated, codes[i], "request %d", i)
			assert.Equal(t, `{"order":1}`, bodies[i], "request %d", i)
		}
	})
}
