package idemhttp_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
	"github.com/idemkit/idemkit/store/storetest"
)

// api is a handler that counts its runs and echoes what it saw. The
// X-Status request header picks the response status (default 201).
type api struct {
	runs  atomic.Int32
	delay time.Duration
	gate  chan struct{} // when set, every run waits for it to close
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.runs.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	if a.gate != nil {
		<-a.gate
	}
	time.Sleep(a.delay)
	status := http.StatusCreated
	if s := r.Header.Get("X-Status"); s != "" {
		status, _ = strconv.Atoi(s)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/orders/%d", n))
	w.Header().Set("X-Run", strconv.Itoa(int(n)))
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"run":%d,"pattern":%q,"body":%q}`, n, r.Pattern, body)
}

// keyMux registers a on several routes behind Idempotency.
func keyMux(t testing.TB, e *idemkit.Engine, a http.Handler, opts ...idemhttp.Option) *http.ServeMux {
	mw := mustMiddleware(t)(idemhttp.Idempotency(e, append([]idemhttp.Option{byUser}, opts...)...))
	mux := http.NewServeMux()
	for _, p := range []string{"POST /orders", "GET /orders", "PUT /orders", "POST /refunds", "POST /accounts/{id}/charges"} {
		mux.Handle(p, mw(a))
	}
	return mux
}

func TestIdempotencyStatusPaths(t *testing.T) {
	alice := req{user: "alice", key: "k-1", body: `{"amount":100,"currency":"EUR"}`}
	with := func(q req, f func(*req)) req { f(&q); return q }
	tests := []struct {
		name       string
		opts       []idemhttp.Option
		before     []req
		final      req
		status     int
		problem    string // problem type, when the middleware answers itself
		replayed   bool
		runs       int32
		bodyPrefix string
	}{
		{name: "first request runs", final: alice, status: 201, runs: 1, bodyPrefix: `{"run":1,"pattern":"POST /orders"`},
		{name: "retry replays", before: []req{alice}, final: alice, status: 201, replayed: true, runs: 1, bodyPrefix: `{"run":1,`},
		{name: "sf-string and bare token are the same key", before: []req{alice},
			final: with(alice, func(q *req) { q.key = `"k-1"` }), status: 201, replayed: true, runs: 1},
		{name: "reordered JSON is the same payload", before: []req{alice},
			final: with(alice, func(q *req) { q.body = `{ "currency":"EUR", "amount":1e2 }` }), status: 201, replayed: true, runs: 1},
		{name: "every member is compared by default", before: []req{with(alice, func(q *req) { q.body = `{"amount":100,"sign":"+"}` })},
			final: with(alice, func(q *req) { q.body = `{"amount":100,"sign":"-"}` }), status: 422, problem: idemhttp.ProblemKeyMismatch, runs: 1},
		{name: "nested members are compared by default", before: []req{with(alice, func(q *req) { q.body = `{"a":{"traceId":"x"}}` })},
			final: with(alice, func(q *req) { q.body = `{"a":{"traceId":"y"}}` }), status: 422, problem: idemhttp.ProblemKeyMismatch, runs: 1},
		{name: "extra volatile field", opts: []idemhttp.Option{idemhttp.WithVolatile("note")},
			before: []req{with(alice, func(q *req) { q.body = `{"a":1,"note":"x"}` })},
			final:  with(alice, func(q *req) { q.body = `{"a":1,"note":"y"}` }), status: 201, replayed: true, runs: 1},
		{name: "other payload is 422", before: []req{alice},
			final: with(alice, func(q *req) { q.body = `{"amount":200,"currency":"EUR"}` }), status: 422, problem: idemhttp.ProblemKeyMismatch, runs: 1},
		{name: "other route is 422", before: []req{alice},
			final: with(alice, func(q *req) { q.target = "/refunds" }), status: 422, problem: idemhttp.ProblemKeyMismatch, runs: 1},
		{name: "other path under one pattern is 422", before: []req{with(alice, func(q *req) { q.target = "/accounts/1/charges" })},
			final: with(alice, func(q *req) { q.target = "/accounts/2/charges" }), status: 422, problem: idemhttp.ProblemKeyMismatch, runs: 1},
		{name: "other query is 422", before: []req{with(alice, func(q *req) { q.target = "/orders?dry=0" })},
			final: with(alice, func(q *req) { q.target = "/orders?dry=1" }), status: 422, problem: idemhttp.ProblemKeyMismatch, runs: 1},
		{name: "unselected query parameter is ignored", opts: []idemhttp.Option{idemhttp.WithQueryParams("dry")},
			before: []req{with(alice, func(q *req) { q.target = "/orders?dry=0&cb=1" })},
			final:  with(alice, func(q *req) { q.target = "/orders?cb=2&dry=0" }), status: 201, replayed: true, runs: 1},
		{name: "other principal with the same key runs", before: []req{alice},
			final: with(alice, func(q *req) { q.user = "bob" }), status: 201, runs: 2, bodyPrefix: `{"run":2,`},
		{name: "missing key is 400", final: with(alice, func(q *req) { q.key = "" }), status: 400, problem: idemhttp.ProblemKeyMissing},
		{name: "optional key lets keyless requests through", opts: []idemhttp.Option{idemhttp.WithOptionalKey()},
			before: []req{with(alice, func(q *req) { q.key = "" })}, final: with(alice, func(q *req) { q.key = "" }), status: 201, runs: 2},
		{name: "malformed key is 400", final: with(alice, func(q *req) { q.key = `"unterminated` }), status: 400, problem: idemhttp.ProblemKeyInvalid},
		{name: "no principal is 401", final: with(alice, func(q *req) { q.user = "" }), status: 401, problem: idemhttp.ProblemUnauthenticated},
		{name: "body over the cap is 413", opts: []idemhttp.Option{idemhttp.WithMaxBody(16)},
			final: alice, status: 413, problem: idemhttp.ProblemBodyTooLarge},
		{name: "body at the cap is read and restored", opts: []idemhttp.Option{idemhttp.WithMaxBody(int64(len(alice.body)))},
			final: alice, status: 201, runs: 1, bodyPrefix: `{"run":1,"pattern":"POST /orders","body":"{\"amount\":100`},
		{name: "GET is not guarded", final: req{method: "GET", user: "alice"}, status: 201, runs: 1},
		{name: "PUT is guarded when configured", opts: []idemhttp.Option{idemhttp.WithMethods("PUT")},
			final: req{method: "PUT", user: "alice"}, status: 400, problem: idemhttp.ProblemKeyMissing},
		{name: "POST is not guarded when not configured", opts: []idemhttp.Option{idemhttp.WithMethods("PUT")},
			before: []req{with(alice, func(q *req) { q.key = "" })}, final: with(alice, func(q *req) { q.key = "" }), status: 201, runs: 2},
		{name: "custom key header", opts: []idemhttp.Option{idemhttp.WithKeyHeader("X-Request-Key")},
			before: []req{with(alice, func(q *req) { q.key = ""; q.header = http.Header{"X-Request-Key": {"abc"}} })},
			final:  with(alice, func(q *req) { q.key = ""; q.header = http.Header{"X-Request-Key": {"abc"}} }), status: 201, replayed: true, runs: 1},
		{name: "500 is not stored: the retry runs", before: []req{with(alice, func(q *req) { q.header = http.Header{"X-Status": {"500"}} })},
			final: alice, status: 201, runs: 2, bodyPrefix: `{"run":2,`},
		{name: "StoreAll replays a 500", opts: []idemhttp.Option{idemhttp.WithStorePolicy(idemhttp.StoreAll)},
			before: []req{with(alice, func(q *req) { q.header = http.Header{"X-Status": {"500"}} })},
			final:  alice, status: 500, replayed: true, runs: 1, bodyPrefix: `{"run":1,`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &api{}
			mux := keyMux(t, testkit.NewEngine(t), a, tc.opts...)
			for _, q := range tc.before {
				serve(mux, q)
			}
			w := serve(mux, tc.final)
			if tc.problem != "" {
				requireProblem(t, w, tc.status, tc.problem)
			} else {
				require.Equal(t, tc.status, w.Code, "body: %s", w.Body)
				assert.Equal(t, tc.replayed, isReplay(w), "Idempotent-Replayed")
			}
			assert.Equal(t, tc.runs, a.runs.Load(), "handler runs")
			assert.True(t, strings.HasPrefix(w.Body.String(), tc.bodyPrefix), "body %s", w.Body)
		})
	}
}

func TestIdempotencyStorePolicy(t *testing.T) {
	for status, stored := range map[int]bool{
		200: true, 201: true, 204: true, 400: true, 404: true, 422: true,
		408: false, 409: false, 425: false, 429: false, 302: false, 500: false, 502: false, 503: false,
	} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			assert.Equal(t, stored, idemhttp.DefaultStorePolicy(status))
			a := &api{}
			mux := keyMux(t, testkit.NewEngine(t), a)
			q := req{user: "u", key: "k", header: http.Header{"X-Status": {strconv.Itoa(status)}}}
			first := serve(mux, q)
			require.Equal(t, status, first.Code)
			second := serve(mux, q)
			require.Equal(t, status, second.Code)
			assert.Equal(t, stored, isReplay(second))
			want := int32(2)
			if stored {
				want = 1
			}
			assert.Equal(t, want, a.runs.Load())
		})
	}
}

func TestIdempotencyMalformedKeys(t *testing.T) {
	long := strings.Repeat("k", idemhttp.MaxKeyLen)
	valid := []string{"abc", `"abc"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", "a:b/c", long, `"` + long + `"`,
		`"with space"`, `"esc\"aped\\"`, " padded\t"}
	invalid := []string{"", " ", `""`, long + "k", `"` + long + `k"`, "a\x01b", "caf\u00e9", `"a` + "\x7f" + `"`,
		`"abc`, `abc"`, `"a"b"`, `"a\x"`, `"a\"`, "a b", "a,b", `a"b`, "a;b", "(a)"}
	a := &api{}
	mux := keyMux(t, testkit.NewEngine(t), a)
	for _, k := range valid {
		w := serve(mux, req{user: "u", key: k, header: http.Header{}})
		assert.Equal(t, 201, w.Code, "key %q: %s", k, w.Body)
	}
	for _, k := range invalid {
		q := req{user: "u", header: http.Header{idemhttp.DefaultKeyHeader: {k}}}
		requireProblem(t, serve(mux, q), 400, idemhttp.ProblemKeyInvalid)
	}
	repeated := req{user: "u", header: http.Header{idemhttp.DefaultKeyHeader: {"a", "b"}}}
	requireProblem(t, serve(mux, repeated), 400, idemhttp.ProblemKeyInvalid)
	// "abc" and abc, and long quoted or not, are the same key: 7 distinct.
	assert.EqualValues(t, len(valid)-2, a.runs.Load())
}

// TestIdempotencyReplayIsByteForByte compares, over a real connection, the
// fresh response and its replay: status, allow-listed headers and body.
func TestIdempotencyReplayIsByteForByte(t *testing.T) {
	bodies := map[string]func(w http.ResponseWriter){
		"explicit headers": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/vnd.order+json; charset=utf-8")
			w.Header().Set("Location", "/orders/42")
			w.Header().Add("X-Order-Tag", "a")
			w.Header().Add("X-Order-Tag", "b")
			w.Header().Set("X-Not-Replayed", "fresh only")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"id":42}`)
		},
		"sniffed content type": func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("<html><body>created</body></html>"))
		},
		"large body with binary bytes": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusCreated)
			b := make([]byte, 100_000)
			for i := range b {
				b[i] = byte(i * 7)
			}
			_, _ = w.Write(b)
		},
		"no body": func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) },
		// Lengths of 128 and more take two bytes in the stored form; from
		// 128 to 255 the first byte alone reads as the length.
		"long header values": func(w http.ResponseWriter) {
			w.Header().Set("Location", "/orders/"+strings.Repeat("a", 142))
			w.Header().Set("X-Order-Tag", strings.Repeat("t", 300))
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":43}`)
		},
	}
	for name, write := range bodies {
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int32
			mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithReplayHeaders("x-order-tag")))
			mux := http.NewServeMux()
			mux.Handle("POST /orders", mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				runs.Add(1)
				write(w)
			})))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			send := func() (*http.Response, []byte) {
				r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"n":1}`))
				require.NoError(t, err)
				r.Header.Set(userHeader, "alice")
				r.Header.Set(idemhttp.DefaultKeyHeader, `"order-42"`)
				resp, err := srv.Client().Do(r)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp, b
			}
			fresh, freshBody := send()
			again, againBody := send()
			assert.EqualValues(t, 1, runs.Load())
			assert.Empty(t, fresh.Header.Values(idemhttp.ReplayedHeader), "a fresh response is never marked")
			assert.Equal(t, []string{"true"}, again.Header.Values(idemhttp.ReplayedHeader))
			assert.Equal(t, fresh.StatusCode, again.StatusCode)
			assert.Equal(t, fresh.ContentLength, again.ContentLength)
			for _, h := range []string{"Content-Type", "Location", "X-Order-Tag"} {
				assert.Equal(t, fresh.Header.Values(h), again.Header.Values(h), h)
			}
			assert.Empty(t, again.Header.Get("X-Not-Replayed"))
			assert.True(t, bytes.Equal(freshBody, againBody), "bodies differ")
		})
	}
}

func TestIdempotencyConcurrentSameKeyRunsOnce(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			a := &api{delay: 5 * time.Millisecond}
			var opts []idemhttp.Option
			if wait {
				opts = append(opts, idemhttp.WithWait(time.Millisecond))
			}
			mux := keyMux(t, testkit.NewEngine(t), a, opts...)
			q := req{user: "alice", key: "same", body: `{"sku":"x"}`}
			const n = 50
			results := make([]*httptest.ResponseRecorder, n)
			var start, wg sync.WaitGroup
			start.Add(1)
			for i := range n {
				wg.Go(func() {
					r := q.build()
					start.Wait()
					results[i] = httptest.NewRecorder()
					mux.ServeHTTP(results[i], r)
				})
			}
			start.Done()
			wg.Wait()
			assert.EqualValues(t, 1, a.runs.Load(), "the handler ran more than once")
			fresh, replays, conflicts := 0, 0, 0
			for _, w := range results {
				switch {
				case w.Code == http.StatusConflict:
					requireProblem(t, w, 409, idemhttp.ProblemInProgress)
					conflicts++
				case w.Code == http.StatusCreated && isReplay(w):
					replays++
					assert.Equal(t, `{"run":1,"pattern":"POST /orders","body":"{\"sku\":\"x\"}"}`, w.Body.String())
				case w.Code == http.StatusCreated:
					fresh++
				default:
					t.Errorf("unexpected response %d %s", w.Code, w.Body)
				}
			}
			assert.Equal(t, 1, fresh)
			assert.Equal(t, n-1, replays+conflicts)
			if wait {
				assert.Zero(t, conflicts, "with WithWait every duplicate gets the replay")
			}
		})
	}
}

func TestIdempotencyInProgressThenReplay(t *testing.T) {
	a := &api{gate: make(chan struct{})}
	mux := keyMux(t, testkit.NewEngine(t), a)
	q := req{user: "alice", key: "k"}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serve(mux, q) }()
	require.Eventually(t, func() bool { return a.runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	w := serve(mux, q)
	requireProblem(t, w, 409, idemhttp.ProblemInProgress)
	assert.Equal(t, "1", w.Header().Get("Retry-After"), "the engine's 1s hint, in whole seconds")
	close(a.gate)
	first := <-done
	assert.Equal(t, 201, first.Code)
	assert.False(t, isReplay(first))
	again := serve(mux, q)
	assert.True(t, isReplay(again))
	assert.Equal(t, first.Body.String(), again.Body.String())
}

// unstoredCases are the two ways a key can end when its response cannot
// be stored: a terminal record (the default) or a release.
var unstoredCases = []struct {
	name    string
	opts    []idemhttp.Option
	release bool
}{
	{name: "terminal by default"},
	{name: "released when configured", release: true, opts: []idemhttp.Option{idemhttp.WithUnstored(idemhttp.ReleaseKey, idemhttp.ReleaseKey)}},
}

// requireUnstoredRetry checks the retry of a request whose response was
// not stored: the handler runs again when the key was released, and
// otherwise the retry gets ProblemResponseNotStored.
func requireUnstoredRetry(t *testing.T, w *httptest.ResponseRecorder, release bool, runs int32) {
	t.Helper()
	if release {
		assert.EqualValues(t, 2, runs, "a released key runs the handler again")
		return
	}
	p := requireProblem(t, w, 500, idemhttp.ProblemResponseNotStored)
	assert.False(t, *p.Retryable)
	assert.EqualValues(t, 1, runs, "a terminal record never runs the handler again")
}

func TestIdempotencyStreamedResponse(t *testing.T) {
	for name, stream := range map[string]func(w http.ResponseWriter) error{
		"Flusher": func(w http.ResponseWriter) error { w.(http.Flusher).Flush(); return nil },
		"ResponseController": func(w http.ResponseWriter) error {
			return http.NewResponseController(w).Flush()
		},
	} {
		for _, tc := range unstoredCases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				var runs atomic.Int32
				mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), append(tc.opts, byUser)...))
				h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					runs.Add(1)
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, "data: 1\n\n")
					require.NoError(t, stream(w))
					_, _ = io.WriteString(w, "data: 2\n\n")
				}))
				q := req{user: "alice", key: "stream"}
				w := serve(h, q)
				assert.Equal(t, 200, w.Code)
				assert.True(t, w.Flushed)
				assert.Equal(t, "data: 1\n\ndata: 2\n\n", w.Body.String())
				assert.False(t, isReplay(w))
				requireUnstoredRetry(t, serve(h, q), tc.release, runs.Load())
			})
		}
	}
}

func TestIdempotencyHijackedResponse(t *testing.T) {
	for _, tc := range unstoredCases {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), append(tc.opts, byUser)...))
			served := make(chan struct{}, 2)
			guarded := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				runs.Add(1)
				conn, brw, err := http.NewResponseController(w).Hijack()
				if !assert.NoError(t, err) {
					return
				}
				defer conn.Close()
				_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nraw ok")
				_ = brw.Flush()
			}))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				guarded.ServeHTTP(w, r)
				served <- struct{}{} // the middleware is done with the key
			}))
			defer srv.Close()
			send := func() (*http.Response, string) {
				r, err := http.NewRequest(http.MethodPost, srv.URL, nil)
				require.NoError(t, err)
				r.Header.Set(userHeader, "alice")
				r.Header.Set(idemhttp.DefaultKeyHeader, "hj")
				resp, err := srv.Client().Do(r)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				<-served
				return resp, string(b)
			}
			_, body := send()
			assert.Equal(t, "raw ok", body)
			resp, body := send()
			if tc.release {
				assert.Equal(t, "raw ok", body)
				assert.EqualValues(t, 2, runs.Load(), "a released key runs the handler again")
				return
			}
			assert.Equal(t, 500, resp.StatusCode)
			assert.Equal(t, "true", resp.Header.Get(idemhttp.ReplayedHeader))
			assert.Contains(t, body, idemhttp.ProblemResponseNotStored)
			assert.EqualValues(t, 1, runs.Load(), "a terminal record never runs the handler again")
		})
	}
}

func TestIdempotencyLargeResponse(t *testing.T) {
	for _, tc := range unstoredCases {
		for _, size := range []string{"body over the cap", "headers take it over the cap"} {
			t.Run(tc.name+"/"+size, func(t *testing.T) {
				var logs bytes.Buffer
				var runs atomic.Int32
				mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), append(tc.opts, byUser,
					idemhttp.WithMaxStoredResponse(64), idemhttp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...))
				big := strings.Repeat("x", 100)
				if size != "body over the cap" {
					big = big[:60]
				}
				h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					runs.Add(1)
					w.Header().Set("Content-Type", "text/plain")
					w.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(w, big[:50])
					_, _ = io.WriteString(w, big[50:])
				}))
				q := req{user: "alice", key: "big"}
				w := serve(h, q)
				assert.Equal(t, 201, w.Code)
				assert.Equal(t, big, w.Body.String())
				assert.False(t, isReplay(w))
				requireUnstoredRetry(t, serve(h, q), tc.release, runs.Load())
				assert.Contains(t, logs.String(), "level=WARN")
				assert.Contains(t, logs.String(), "not stored")
			})
		}
	}
}

// A token spent on a response that cannot be stored keeps a terminal
// record too: its reuse gets ProblemResponseNotStored, not a second run.
func TestTokenLargeResponse(t *testing.T) {
	for _, tc := range unstoredCases {
		t.Run(tc.name, func(t *testing.T) {
			a := &api{}
			mux := tokenMux(t, testkit.NewEngine(t), a, append(tc.opts, idemhttp.WithMaxStoredResponse(8))...)
			q := req{user: "alice", token: issue(t, mux, "alice")}
			assert.Equal(t, 201, serve(mux, q).Code)
			w := serve(mux, q)
			if tc.release {
				requireProblem(t, w, 409, idemhttp.ProblemTokenUsed)
			} else {
				requireProblem(t, w, 500, idemhttp.ProblemResponseNotStored)
			}
			assert.EqualValues(t, 1, a.runs.Load())
		})
	}
}

// TestIdempotencyEngineResultCap: a response under the route's cap but
// over the engine's is sent as written and not stored; its key keeps the
// engine's terminal record, so a retry gets 500 response-not-stored and
// the handler does not run again, unless the engine releases the key
// (idemkit.WithOversized(idemkit.ReleaseKey)).
func TestIdempotencyEngineResultCap(t *testing.T) {
	for _, release := range []bool{false, true} {
		var logs bytes.Buffer
		var runs atomic.Int32
		e := testkit.NewEngine(t, idemkit.WithMaxResultSize(32))
		opts := []idemhttp.Option{byUser, idemhttp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}
		if release {
			opts = append(opts, idemhttp.WithEngineOptions(idemkit.WithOversized(idemkit.ReleaseKey)))
		}
		mw := mustMiddleware(t)(idemhttp.Idempotency(e, opts...))
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs.Add(1)
			_, _ = io.WriteString(w, strings.Repeat("y", 40))
		}))
		w := serve(h, req{user: "alice", key: "k"})
		assert.Equal(t, 200, w.Code)
		assert.Len(t, w.Body.String(), 40)
		for range 2 {
			w = serve(h, req{user: "alice", key: "k"})
			if release {
				assert.Equal(t, 200, w.Code)
				continue
			}
			requireProblem(t, w, 500, idemhttp.ProblemResponseNotStored)
			assert.True(t, isReplay(w))
		}
		if release {
			assert.EqualValues(t, 3, runs.Load())
		} else {
			assert.EqualValues(t, 1, runs.Load(), "a retry ran the handler again")
		}
		assert.Contains(t, logs.String(), "result cap")
		assert.NotContains(t, logs.String(), "unexpected engine outcome")
	}
}

func TestIdempotencyPanicReleasesKey(t *testing.T) {
	var runs atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	q := req{user: "alice", key: "p"}
	assert.PanicsWithValue(t, "boom", func() { serve(h, q) })
	assert.Equal(t, 201, serve(h, q).Code)
	assert.True(t, isReplay(serve(h, q)))
	assert.EqualValues(t, 2, runs.Load())
}

func TestStoreDown(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	failOpen := idemhttp.WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen))
	modes := map[string]func(*idemkit.Engine, ...idemhttp.Option) (func(http.Handler) http.Handler, error){
		"Idempotency": idemhttp.Idempotency, "Window": idemhttp.Window, "Token": idemhttp.Token,
	}
	q := req{user: "alice", key: "k", token: "tok_0123456789abcdefghijkl"}
	for name, mode := range modes {
		t.Run(name+"/fail-closed", func(t *testing.T) {
			h := mustMiddleware(t)(mode(testkit.NewEngineOn(t, storetest.Unavailable()), byUser))(ok)
			w := serve(h, q)
			requireProblem(t, w, 503, idemhttp.ProblemUnavailable)
			assert.Equal(t, "1", w.Header().Get("Retry-After"))
		})
		t.Run(name+"/fail-open", func(t *testing.T) {
			var runs atomic.Int32
			h := mustMiddleware(t)(mode(testkit.NewEngineOn(t, storetest.Unavailable()), byUser, failOpen))(http.HandlerFunc(
				func(w http.ResponseWriter, r *http.Request) { runs.Add(1); ok(w, r) }))
			for i := range 2 {
				w := serve(h, q)
				assert.Equal(t, 201, w.Code)
				assert.False(t, isReplay(w))
				assert.EqualValues(t, i+1, runs.Load(), "fail-open runs every request")
			}
		})
	}
	t.Run("TokenIssuer", func(t *testing.T) {
		iss, err := idemhttp.TokenIssuer(testkit.NewEngineOn(t, storetest.Unavailable()), byUser, failOpen)
		require.NoError(t, err)
		requireProblem(t, serve(iss, req{user: "alice"}), 503, idemhttp.ProblemUnavailable)
	})
}

// Invalid values are refused by every constructor the option applies to
// (TestOptionsRefusedOutsideTheirMode covers the others).
func TestConstructorsValidate(t *testing.T) {
	const all = "Idempotency Window Token TokenIssuer"
	bad := []struct {
		why  string
		opts []idemhttp.Option
		in   string // the constructors the option applies to
	}{
		{"no principal", nil, all},
		{"nil principal", []idemhttp.Option{idemhttp.WithPrincipal(nil)}, all},
		{"key header", []idemhttp.Option{byUser, idemhttp.WithKeyHeader("bad header")}, "Idempotency"},
		{"token header", []idemhttp.Option{byUser, idemhttp.WithTokenHeader("")}, "Token"},
		{"no methods", []idemhttp.Option{byUser, idemhttp.WithMethods()}, "Idempotency Window Token"},
		{"bad method", []idemhttp.Option{byUser, idemhttp.WithMethods("PO ST")}, "Idempotency Window Token"},
		{"nil policy", []idemhttp.Option{byUser, idemhttp.WithStorePolicy(nil)}, "Idempotency Window Token"},
		{"replay header", []idemhttp.Option{byUser, idemhttp.WithReplayHeaders("a:b")}, "Idempotency Token"},
		{"max body", []idemhttp.Option{byUser, idemhttp.WithMaxBody(0), idemhttp.WithTokenField("f")}, "Token"},
		{"max body", []idemhttp.Option{byUser, idemhttp.WithMaxBody(0)}, "Idempotency Window"},
		{"max stored", []idemhttp.Option{byUser, idemhttp.WithMaxStoredResponse(-1)}, "Idempotency Token"},
		{"max stored zero", []idemhttp.Option{byUser, idemhttp.WithMaxStoredResponse(0)}, "Idempotency Token"},
		{"nil fingerprint", []idemhttp.Option{byUser, idemhttp.WithFingerprinter(nil)}, "Idempotency Window"},
		{"replay marker", []idemhttp.Option{byUser, idemhttp.WithReplayHeader("")}, "Idempotency Token"},
		{"token field", []idemhttp.Option{byUser, idemhttp.WithTokenField("")}, "Token"},
		{"unstored", []idemhttp.Option{byUser, idemhttp.WithUnstored(idemhttp.ReleaseKey+1, idemhttp.KeepTerminal)}, "Idempotency Token"},
		{"payload window", []idemhttp.Option{byUser, idemhttp.WithPayloadWindow(-time.Second)}, "Idempotency"},
		{"problem base", []idemhttp.Option{byUser, idemhttp.WithProblemBase("problems/")}, all},
		{"problem members", []idemhttp.Option{byUser, idemhttp.WithProblemMembers(idemhttp.DefaultProblemMembers + 1)}, all},
		{"nil instance", []idemhttp.Option{byUser, idemhttp.WithProblemInstance(nil)}, all},
		{"volatile path", []idemhttp.Option{byUser, idemhttp.WithVolatile("items[]")}, "Idempotency Window"},
		{"nil logger", []idemhttp.Option{byUser, idemhttp.WithLogger(nil)}, all},
		{"wait poll", []idemhttp.Option{byUser, idemhttp.WithWait(-time.Second)}, "Idempotency Token"},
	}
	for name, ctor := range constructors(testkit.NewEngine(t)) {
		require.NoError(t, ctor(byUser), name)
		for _, b := range bad {
			if !strings.Contains(b.in, name) {
				continue
			}
			err := ctor(b.opts...)
			if assert.ErrorIs(t, err, idemkit.ErrInvalid, "%s: %s", name, b.why) {
				assert.NotContains(t, err.Error(), "applies to", "%s: %s", name, b.why)
			}
		}
	}
	_, err := idemhttp.Idempotency(nil, byUser)
	assert.ErrorIs(t, err, idemkit.ErrInvalid)
}

// Engine options are checked once, when the route's view is built: an
// invalid one, one set per engine (namespace) or one set per request by
// the middleware itself (scope) fails the constructor.
func TestInvalidEngineOptionIsRejectedAtConstruction(t *testing.T) {
	for name, ctor := range constructors(testkit.NewEngine(t)) {
		for why, opt := range map[string]idemkit.Option{
			"negative lease": idemkit.WithLease(-1),
			"namespace":      idemkit.WithNamespace("other"),
			"scope":          idemkit.WithScope("alice"),
		} {
			assert.ErrorIs(t, ctor(byUser, idemhttp.WithEngineOptions(opt)), idemkit.ErrInvalid, "%s: %s", name, why)
		}
	}
}

func TestTrustedHeaderPrincipal(t *testing.T) {
	p := idemhttp.TrustedHeaderPrincipal("x-user")
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	_, err := p(r)
	assert.ErrorIs(t, err, idemhttp.ErrNoPrincipal)
	r.Header.Add(userHeader, "alice")
	got, err := p(r)
	require.NoError(t, err)
	assert.Equal(t, "alice", got)
	r.Header.Add(userHeader, "mallory")
	_, err = p(r)
	assert.ErrorIs(t, err, idemhttp.ErrNoPrincipal, "a repeated header is ambiguous")
}

// A body encoded by the handler (Content-Encoding) means nothing without
// that header: the replay must carry it, or the client gets gzip bytes
// labelled as something else.
func TestIdempotencyReplayKeepsContentEncoding(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"id":42}`))
	require.NoError(t, zw.Close())
	srv, c := liveServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(gz.Bytes())
	})
	fresh, freshBody := livePost(t, srv, c, "gz", nil)
	again, againBody := livePost(t, srv, c, "gz", nil)
	require.Equal(t, "true", again.Header.Get(idemhttp.ReplayedHeader))
	assert.Equal(t, "gzip", fresh.Header.Get("Content-Encoding"))
	assert.Equal(t, fresh.Header.Values("Content-Encoding"), again.Header.Values("Content-Encoding"))
	assert.Equal(t, fresh.Header.Values("Content-Type"), again.Header.Values("Content-Type"))
	assert.Equal(t, freshBody, againBody)
}

// Concurrent requests with one key from two principals: each principal's
// handler runs once and nobody ever gets the other's response.
func TestIdempotencyPrincipalsNeverShareResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs sync.Map
		mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithWait(time.Millisecond)))
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := r.Header.Get(userHeader)
			n, _ := runs.LoadOrStore(u, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			time.Sleep(time.Millisecond)
			_, _ = io.WriteString(w, "for "+u)
		}))
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			user := []string{"alice", "bob"}[i%2]
			wg.Go(func() {
				w := serve(h, req{user: user, key: "shared"})
				if w.Body.String() != "for "+user {
					errs <- errors.New(user + " got " + w.Body.String())
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		runs.Range(func(k, v any) bool {
			assert.EqualValues(t, 1, v.(*atomic.Int32).Load(), "%s's handler runs", k)
			return true
		})
	})
}

func TestIdempotencyPayloadWindow(t *testing.T) {
	a := &api{}
	mux := keyMux(t, testkit.NewEngine(t), a, idemhttp.WithPayloadWindow(time.Hour))
	order := req{user: "alice", key: "click-1", body: `{"sku":"x"}`}
	require.Equal(t, 201, serve(mux, order).Code)

	again := order
	again.key = "click-2"
	p := requireProblem(t, serve(mux, again), 409, idemhttp.ProblemPayloadReused)
	assert.Equal(t, "click-2", p.IdempotencyKey)
	assert.False(t, *p.Retryable)

	assert.True(t, isReplay(serve(mux, order)), "a retry with the first key gets its outcome")
	other := again
	other.body = `{"sku":"y"}`
	assert.Equal(t, 201, serve(mux, other).Code, "another payload under a new key runs")
	bob := again
	bob.user = "bob"
	assert.Equal(t, 201, serve(mux, bob).Code, "another principal's payload is its own")
	assert.EqualValues(t, 3, a.runs.Load())

	plain := keyMux(t, testkit.NewEngine(t), &api{})
	require.Equal(t, 201, serve(plain, order).Code)
	assert.Equal(t, 201, serve(plain, again).Code, "off by default")

	_, err := idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithPayloadWindow(0))
	assert.ErrorIs(t, err, idemkit.ErrInvalid)
}

func TestIdempotencyPayloadWindowEnds(t *testing.T) {
	a := &api{}
	mux := keyMux(t, testkit.NewEngine(t), a, idemhttp.WithPayloadWindow(20*time.Millisecond))
	require.Equal(t, 201, serve(mux, req{user: "alice", key: "k1", body: "b"}).Code)
	n := 1
	require.Eventually(t, func() bool {
		n++
		return serve(mux, req{user: "alice", key: fmt.Sprint("k", n), body: "b"}).Code == 201
	}, 5*time.Second, 5*time.Millisecond)
	assert.EqualValues(t, 2, a.runs.Load())
}

// Many clicks at once, each with its own key and the same payload: one
// runs; every other is told the payload was already submitted.
func TestIdempotencyPayloadWindowConcurrentKeysRunOnce(t *testing.T) {
	a := &api{delay: time.Millisecond}
	mux := keyMux(t, testkit.NewEngine(t), a, idemhttp.WithPayloadWindow(time.Hour))
	const n = 50
	results := make([]*httptest.ResponseRecorder, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			r := req{user: "alice", key: fmt.Sprint("click-", i), body: `{"sku":"x"}`}.build()
			start.Wait()
			results[i] = httptest.NewRecorder()
			mux.ServeHTTP(results[i], r)
		})
	}
	start.Done()
	wg.Wait()
	ran := 0
	for _, w := range results {
		switch w.Code {
		case http.StatusCreated:
			ran++
		default:
			requireProblem(t, w, 409, idemhttp.ProblemPayloadReused)
		}
	}
	assert.Equal(t, 1, ran)
	assert.EqualValues(t, 1, a.runs.Load())
}

// Racing requests with one key whose response is streamed: the handler
// runs once, and every other request is told the first is in progress or
// that its response was not stored.
func TestIdempotencyConcurrentStreamedRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs.Add(1)
			_, _ = io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}))
		const n = 50
		results := make([]*httptest.ResponseRecorder, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range n {
			wg.Go(func() {
				r := req{user: "alice", key: "stream"}.build()
				start.Wait()
				results[i] = httptest.NewRecorder()
				h.ServeHTTP(results[i], r)
			})
		}
		start.Done()
		wg.Wait()
		streamed := 0
		for _, w := range results {
			switch w.Code {
			case http.StatusOK:
				streamed++
			case http.StatusConflict:
				requireProblem(t, w, 409, idemhttp.ProblemInProgress)
			default:
				requireProblem(t, w, 500, idemhttp.ProblemResponseNotStored)
			}
		}
		assert.Equal(t, 1, streamed)
		assert.EqualValues(t, 1, runs.Load())
	})
}
