package idemhttp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// A handler whose downstream call timed out marks the outcome unknown and
// answers 504. Under the default store policy a 504 would release the key
// and a retry would run the work again; instead the client gets the 504
// and every retry the replayed outcome-unknown problem, without a second
// run. What the handler had written before the call is discarded.
func TestOutcomeUnknownKeepsTheKey(t *testing.T) {
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "partial")
		discarded, err := idemhttp.OutcomeUnknown(r)
		if !discarded || err != nil {
			t.Errorf("OutcomeUnknown: %v, %v; want true, nil", discarded, err)
		}
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = io.WriteString(w, "timed out")
	})
	for name, mw := range map[string]func(http.Handler) http.Handler{
		"Idempotency": mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser)),
		"StoreAll":    mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithStorePolicy(idemhttp.StoreAll))),
	} {
		t.Run(name, func(t *testing.T) {
			runs.Store(0)
			srv := mw(h)
			w := serve(srv, req{user: "alice", key: "k", body: `{}`})
			assert.Equal(t, http.StatusGatewayTimeout, w.Code)
			assert.Equal(t, "timed out", w.Body.String())
			for range 2 {
				w = serve(srv, req{user: "alice", key: "k", body: `{}`})
				requireProblem(t, w, http.StatusInternalServerError, idemhttp.ProblemOutcomeUnknown)
			}
			assert.Equal(t, int32(1), runs.Load())
		})
	}
}

// A handler that has begun to stream its response when it learns the
// outcome is unknown cuts the response off (http.ErrAbortHandler): the
// client sees a broken response, not a whole one, and the key still keeps
// its outcome-unknown record, whatever WithUnstored says of streams.
func TestOutcomeUnknownAfterAStreamedStartThenAbort(t *testing.T) {
	var runs atomic.Int32
	srv, c := liveServer(t, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "part")
		http.NewResponseController(w).Flush()
		discarded, err := idemhttp.OutcomeUnknown(r)
		if discarded || err != nil {
			t.Errorf("OutcomeUnknown after a flush: %v, %v; want false, nil", discarded, err)
		}
		panic(http.ErrAbortHandler)
	}, idemhttp.WithUnstored(idemhttp.ReleaseKey, idemhttp.ReleaseKey))
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	r.Header.Set(userHeader, "alice")
	r.Header.Set(idemhttp.DefaultKeyHeader, "k")
	if res, err := c.Do(r); err == nil {
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
		require.Error(t, err, "the cut-off body reads as an error")
	}
	res, b := livePost(t, srv, c, "k", nil)
	assert.Equal(t, http.StatusInternalServerError, res.StatusCode, "%s", b)
	assert.Contains(t, string(b), idemhttp.ProblemOutcomeUnknown)
	assert.Equal(t, int32(1), runs.Load())
}

// In Window mode an unknown outcome keeps the claim for the window, as a
// success does, though ReleaseOnError would release it after a 5xx.
func TestOutcomeUnknownKeepsTheWindow(t *testing.T) {
	var runs atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Window(testkit.NewEngine(t), byUser,
		idemhttp.WithEngineOptions(idemkit.WithRelease(idemkit.ReleaseOnError))))
	srv := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.Header.Get("X-Unknown") != "" {
			discarded, err := idemhttp.OutcomeUnknown(r)
			assert.True(t, discarded)
			assert.NoError(t, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}))
	// Without the mark, a 502 releases the window: the repeat runs.
	serve(srv, req{user: "alice", body: `{"a":1}`})
	w := serve(srv, req{user: "alice", body: `{"a":1}`})
	assert.Equal(t, http.StatusBadGateway, w.Code)
	assert.Equal(t, int32(2), runs.Load())
	// With it, the repeat is refused.
	unknown := http.Header{"X-Unknown": {"1"}}
	w = serve(srv, req{user: "alice", body: `{"a":2}`, header: unknown})
	assert.Equal(t, http.StatusBadGateway, w.Code)
	w = serve(srv, req{user: "alice", body: `{"a":2}`, header: unknown})
	requireProblem(t, w, http.StatusConflict, idemhttp.ProblemDuplicate)
	assert.Equal(t, int32(3), runs.Load())
}

func TestOutcomeUnknownNeedsTheMiddleware(t *testing.T) {
	discarded, err := idemhttp.OutcomeUnknown(req{}.build())
	assert.False(t, discarded)
	assert.True(t, errors.Is(err, idemkit.ErrInvalid), "%v", err)
}
