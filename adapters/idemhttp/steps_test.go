package idemhttp_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// A handler behind the middleware runs steps in its request's context: a
// retry after a 5xx (which releases the key) skips the steps the first
// attempt recorded and resumes at the one that failed.
func TestHandlerStepsResumeOnRetry(t *testing.T) {
	var reserved, charged atomic.Int32
	var down atomic.Bool
	down.Store(true)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) { reserved.Add(1); return nil, nil }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, err := idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
			charged.Add(1)
			if down.Load() {
				return nil, context.DeadlineExceeded
			}
			return []byte("ch_1"), nil
		})
		if err != nil {
			http.Error(w, "provider down", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))(h)
	q := req{user: "alice", key: "order-1", body: `{"sku":"pen"}`}
	require.Equal(t, http.StatusBadGateway, serve(mw, q).Code)
	down.Store(false)
	require.Equal(t, http.StatusCreated, serve(mw, q).Code)
	w := serve(mw, q)
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "true", w.Header().Get(idemhttp.ReplayedHeader))
	assert.EqualValues(t, 1, reserved.Load(), "the recorded step did not run again")
	assert.EqualValues(t, 2, charged.Load())
}
