package idemhttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// echoBody answers 201 with the request body it read.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
})

// onlyReader hides everything but Read, so that httptest.NewRequest cannot
// tell the length: the body arrives as with chunked encoding.
type onlyReader struct{ io.Reader }

// TestBodySizes: the handler gets the whole body, whatever its size
// relative to the buffers the middleware reads into, with and without a
// known Content-Length, and the replay returns what the first run saw.
func TestBodySizes(t *testing.T) {
	h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithMaxStoredResponse(1<<20)))(echoBody)
	for _, n := range []int{0, 1, 511, 512, 4095, 4096, 4097, 8192, 70000} {
		for _, known := range []bool{true, false} {
			body := []byte(strings.Repeat("x", n))
			send := func() *httptest.ResponseRecorder {
				var rd io.Reader = bytes.NewReader(body)
				if !known {
					rd = onlyReader{rd}
				}
				r := httptest.NewRequest(http.MethodPost, "/orders", rd)
				r.Header.Set(userHeader, "alice")
				r.Header.Set(idemhttp.DefaultKeyHeader, fmt.Sprintf("k-%d-%t", n, known))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			first := send()
			require.Equal(t, http.StatusCreated, first.Code, "size %d, known %t", n, known)
			require.Equal(t, n, first.Body.Len(), "size %d, known %t", n, known)
			require.True(t, bytes.Equal(body, first.Body.Bytes()))
			again := send()
			require.True(t, isReplay(again), "size %d, known %t", n, known)
			require.True(t, bytes.Equal(body, again.Body.Bytes()), "size %d, known %t", n, known)
		}
	}
}

// TestBodiesConcurrent races first runs against replays, which return
// their body buffers for reuse: every handler must see its own body, and
// every replay the response of its own key.
func TestBodiesConcurrent(t *testing.T) {
	h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))(echoBody)
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range rounds {
				body := fmt.Sprintf(`{"worker":%d,"round":%d,"pad":%q}`, g, i, strings.Repeat("p", (g*rounds+i)%300))
				for try := range 3 {
					r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
					r.Header.Set(userHeader, "alice")
					r.Header.Set(idemhttp.DefaultKeyHeader, fmt.Sprintf("k-%d-%d", g, i))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if !assert.Equal(t, http.StatusCreated, w.Code) || !assert.Equal(t, body, w.Body.String()) ||
						!assert.Equal(t, try > 0, isReplay(w)) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestBodyClosedOnceRead: a body read to its end is closed, whether the
// handler then runs (it reads the restored copy) or the response is
// replayed; a body over the cap is left to the server.
func TestBodyClosedOnceRead(t *testing.T) {
	h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithMaxBody(10)))(echoBody)
	send := func(body string) (*httptest.ResponseRecorder, *atomic.Int32) {
		cc := closeCounter{Reader: strings.NewReader(body), closed: new(atomic.Int32)}
		r := httptest.NewRequest(http.MethodPost, "/orders", nil)
		r.Body, r.ContentLength = cc, int64(len(body))
		r.Header.Set(userHeader, "alice")
		r.Header.Set(idemhttp.DefaultKeyHeader, "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w, cc.closed
	}
	first, closed := send("order")
	assert.Equal(t, "order", first.Body.String())
	assert.EqualValues(t, 1, closed.Load(), "fresh")
	again, closed := send("order")
	assert.True(t, isReplay(again))
	assert.EqualValues(t, 1, closed.Load(), "replay")
	tooLarge, closed := send("more than ten bytes")
	requireProblem(t, tooLarge, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	assert.Zero(t, closed.Load(), "over the cap")
}

// TestReplayKeepsTheConnection: over a real connection, a replay, whose
// request body the middleware closed, leaves the connection open for the
// next request.
func TestReplayKeepsTheConnection(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))(echoBody))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) }}
	for range 3 {
		resp, body := livePost(t, srv, srv.Client(), "k", trace)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, `{"n":1}`, string(body))
	}
	assert.Equal(t, []bool{false, true, true}, reused)
}
