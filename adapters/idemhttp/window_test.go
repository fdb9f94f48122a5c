package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

func windowMux(t testing.TB, e *idemkit.Engine, a http.Handler, opts ...idemhttp.Option) *http.ServeMux {
	mw := mustMiddleware(t)(idemhttp.Window(e, append([]idemhttp.Option{byUser}, opts...)...))
	mux := http.NewServeMux()
	for _, p := range []string{"POST /orders", "GET /orders", "POST /refunds", "POST /accounts/{id}/charges"} {
		mux.Handle(p, mw(a))
	}
	return mux
}

func TestWindowStatusPaths(t *testing.T) {
	sub := req{user: "alice", body: `{"sku":"x","qty":1}`}
	with := func(q req, f func(*req)) req { f(&q); return q }
	tests := []struct {
		name    string
		opts    []idemhttp.Option
		before  []req
		final   req
		status  int
		problem string
		runs    int32
	}{
		{name: "first submission runs", final: sub, status: 201, runs: 1},
		{name: "repeat is 409", before: []req{sub}, final: sub, status: 409, problem: idemhttp.ProblemDuplicate, runs: 1},
		{name: "repeat with reordered JSON and volatile fields is 409",
			before: []req{with(sub, func(q *req) { q.body = `{"sku":"x","qty":1,"timestamp":1}` })},
			final:  with(sub, func(q *req) { q.body = `{"qty":1.0,"sku":"x","timestamp":2}` }), status: 409, problem: idemhttp.ProblemDuplicate, runs: 1},
		{name: "other body runs", before: []req{sub}, final: with(sub, func(q *req) { q.body = `{"sku":"y","qty":1}` }), status: 201, runs: 2},
		{name: "other principal runs", before: []req{sub}, final: with(sub, func(q *req) { q.user = "bob" }), status: 201, runs: 2},
		{name: "other route runs", before: []req{sub}, final: with(sub, func(q *req) { q.target = "/refunds" }), status: 201, runs: 2},
		{name: "other path under one pattern runs", before: []req{with(sub, func(q *req) { q.target = "/accounts/1/charges" })},
			final: with(sub, func(q *req) { q.target = "/accounts/2/charges" }), status: 201, runs: 2},
		{name: "query is ignored by default", before: []req{with(sub, func(q *req) { q.target = "/orders?cart=1" })},
			final: with(sub, func(q *req) { q.target = "/orders?cart=2" }), status: 409, problem: idemhttp.ProblemDuplicate, runs: 1},
		{name: "selected query parameter counts", opts: []idemhttp.Option{idemhttp.WithQueryParams("cart")},
			before: []req{with(sub, func(q *req) { q.target = "/orders?cart=1&cb=1" })},
			final:  with(sub, func(q *req) { q.target = "/orders?cart=2&cb=1" }), status: 201, runs: 2},
		{name: "unselected query parameter is ignored", opts: []idemhttp.Option{idemhttp.WithQueryParams("cart")},
			before: []req{with(sub, func(q *req) { q.target = "/orders?cart=1&cb=1" })},
			final:  with(sub, func(q *req) { q.target = "/orders?cb=2&cart=1" }), status: 409, problem: idemhttp.ProblemDuplicate, runs: 1},
		{name: "GET is not guarded", before: []req{{method: "GET", user: "alice"}}, final: req{method: "GET", user: "alice"}, status: 201, runs: 2},
		{name: "no principal is 401", final: with(sub, func(q *req) { q.user = "" }), status: 401, problem: idemhttp.ProblemUnauthenticated},
		{name: "body over the cap is 413", opts: []idemhttp.Option{idemhttp.WithMaxBody(4)}, final: sub, status: 413, problem: idemhttp.ProblemBodyTooLarge},
		{name: "kept after a 500 by default", before: []req{with(sub, func(q *req) { q.header = http.Header{"X-Status": {"500"}} })},
			final: sub, status: 409, problem: idemhttp.ProblemDuplicate, runs: 1},
		{name: "ReleaseOnError releases after a 500",
			opts:   []idemhttp.Option{idemhttp.WithEngineOptions(idemkit.WithRelease(idemkit.ReleaseOnError))},
			before: []req{with(sub, func(q *req) { q.header = http.Header{"X-Status": {"500"}} })}, final: sub, status: 201, runs: 2},
		{name: "ReleaseOnError keeps after a 201",
			opts:   []idemhttp.Option{idemhttp.WithEngineOptions(idemkit.WithRelease(idemkit.ReleaseOnError))},
			before: []req{sub}, final: sub, status: 409, problem: idemhttp.ProblemDuplicate, runs: 1},
		{name: "ReleaseOnDone only stops concurrent repeats",
			opts:   []idemhttp.Option{idemhttp.WithEngineOptions(idemkit.WithRelease(idemkit.ReleaseOnDone))},
			before: []req{sub}, final: sub, status: 201, runs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &api{}
			mux := windowMux(t, testkit.NewEngine(t), a, tc.opts...)
			for _, q := range tc.before {
				serve(mux, q)
			}
			w := serve(mux, tc.final)
			if tc.problem != "" {
				requireProblem(t, w, tc.status, tc.problem)
			} else {
				require.Equal(t, tc.status, w.Code, "body: %s", w.Body)
				assert.False(t, isReplay(w), "window mode never replays")
			}
			assert.Equal(t, tc.runs, a.runs.Load())
		})
	}
}

func TestWindowRetryAfterIsTheRemainingWindow(t *testing.T) {
	for _, window := range []time.Duration{30 * time.Second, 1500 * time.Millisecond, 200 * time.Millisecond} {
		mux := windowMux(t, testkit.NewEngine(t), &api{}, idemhttp.WithEngineOptions(idemkit.WithWindow(window)))
		q := req{user: "alice", body: "form=1"}
		require.Equal(t, 201, serve(mux, q).Code)
		w := serve(mux, q)
		requireProblem(t, w, 409, idemhttp.ProblemDuplicate)
		want := int((window + time.Second - 1) / time.Second) // rounded up; the remaining time is a little less
		assert.Equal(t, strconv.Itoa(want), w.Header().Get("Retry-After"), "window %v", window)
	}
}

func TestWindowConcurrentSubmissionsAdmitOne(t *testing.T) {
	a := &api{delay: time.Millisecond}
	mux := windowMux(t, testkit.NewEngine(t), a)
	const n = 50
	results := make([]*httptest.ResponseRecorder, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			r := req{user: "alice", body: `{"vote":"yes"}`}.build()
			start.Wait()
			results[i] = httptest.NewRecorder()
			mux.ServeHTTP(results[i], r)
		})
	}
	start.Done()
	wg.Wait()
	admitted := 0
	for _, w := range results {
		if w.Code == http.StatusCreated {
			admitted++
			continue
		}
		requireProblem(t, w, 409, idemhttp.ProblemDuplicate)
	}
	assert.Equal(t, 1, admitted)
	assert.EqualValues(t, 1, a.runs.Load())
}

// WithInclude in Window mode: a repeat that differs only outside the
// named members is the same submission.
func TestWindowWithInclude(t *testing.T) {
	n := 0
	mux := windowMux(t, testkit.NewEngine(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.WriteHeader(http.StatusCreated)
	}), idemhttp.WithInclude("sku", "qty"))
	first := serve(mux, req{user: "alice", body: `{"sku":"x","qty":1,"note":"a"}`})
	same := serve(mux, req{user: "alice", body: `{"qty":1,"sku":"x","note":"b"}`})
	other := serve(mux, req{user: "alice", body: `{"sku":"x","qty":2,"note":"a"}`})
	assert.Equal(t, http.StatusCreated, first.Code)
	requireProblem(t, same, http.StatusConflict, idemhttp.ProblemDuplicate)
	assert.Equal(t, http.StatusCreated, other.Code)
	assert.Equal(t, 2, n)
}
