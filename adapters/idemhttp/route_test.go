package idemhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// chunkedBody hides its length, as a chunked request body does.
type chunkedBody struct{ io.Reader }

func TestBodyCapWithUnknownLength(t *testing.T) {
	const limit = 1000
	for _, n := range []int{0, 1, limit - 1, limit} {
		a := &api{}
		mux := keyMux(t, newEngine(t), a, idemhttp.WithMaxBody(limit))
		payload := strings.Repeat("z", n)
		r := httptest.NewRequest(http.MethodPost, "/orders", chunkedBody{strings.NewReader(payload)})
		require.EqualValues(t, -1, r.ContentLength)
		r.Header.Set(userHeader, "alice")
		r.Header.Set(idemhttp.DefaultKeyHeader, "k")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		require.Equal(t, 201, w.Code, "n=%d: %s", n, w.Body)
		assert.Contains(t, w.Body.String(), `"body":"`+payload+`"`, "n=%d: the handler sees the whole body", n)
	}
	for _, n := range []int{limit + 1, 3 * limit} {
		a := &api{}
		mux := keyMux(t, newEngine(t), a, idemhttp.WithMaxBody(limit))
		r := httptest.NewRequest(http.MethodPost, "/orders", chunkedBody{strings.NewReader(strings.Repeat("z", n))})
		r.Header.Set(userHeader, "alice")
		r.Header.Set(idemhttp.DefaultKeyHeader, "k")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		requireProblem(t, w, 413, idemhttp.ProblemBodyTooLarge)
		assert.Zero(t, a.runs.Load())
	}
}

// A server-wide http.MaxBytesReader limit is a 413 too, not "unreadable".
func TestBodyOuterMaxBytesReaderIs413(t *testing.T) {
	a := &api{}
	mux := keyMux(t, newEngine(t), a)
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 8)
		mux.ServeHTTP(w, r)
	})
	w := serve(limited, req{user: "alice", key: "k", body: strings.Repeat("x", 64)})
	requireProblem(t, w, 413, idemhttp.ProblemBodyTooLarge)
	assert.Zero(t, a.runs.Load())
}

// stalled is a request body whose client declared a length and then sent
// nothing.
type stalled struct{}

func (stalled) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// The declared Content-Length is the client's word: the middleware must not
// allocate the whole cap up front for bytes that never arrive (a few header
// bytes would then pin a megabyte each).
func TestBodyDeclaredLengthIsNotPreallocated(t *testing.T) {
	mux := keyMux(t, newEngine(t), &api{})
	const n = 16
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		r := httptest.NewRequest(http.MethodPost, "/orders", io.NopCloser(stalled{}))
		r.ContentLength = idemhttp.DefaultMaxBody
		r.Header.Set(userHeader, "alice")
		r.Header.Set(idemhttp.DefaultKeyHeader, "k")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		requireProblem(t, w, 400, idemhttp.ProblemBodyUnreadable)
	}
	runtime.ReadMemStats(&after)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / n
	assert.Less(t, perRequest, uint64(idemhttp.DefaultMaxBody/4), "bytes allocated per request")
}
