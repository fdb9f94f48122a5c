package idemhttp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

const userHeader = "X-User"

var byUser = idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal(userHeader))

// req describes one test request.
type req struct {
	method, target, body string
	user                 string
	key                  string // Idempotency-Key value; "" for none
	token                string // Idempotency-Token value; "" for none
	header               http.Header
}

func (q req) build() *http.Request {
	method := q.method
	if method == "" {
		method = http.MethodPost
	}
	target := q.target
	if target == "" {
		target = "/orders"
	}
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r := httptest.NewRequest(method, target, body)
	if q.user != "" {
		r.Header.Set(userHeader, q.user)
	}
	if q.key != "" {
		r.Header.Set(idemhttp.DefaultKeyHeader, q.key)
	}
	if q.token != "" {
		r.Header.Set(idemhttp.DefaultTokenHeader, q.token)
	}
	for k, vs := range q.header {
		r.Header[k] = vs
	}
	return r
}

func serve(h http.Handler, q req) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, q.build())
	return w
}

// requireProblem checks that w is a problem document of the given type and
// status, with the default optional members (a fresh urn:uuid instance,
// retryable agreeing with Retry-After), and returns it.
func requireProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ string) idemhttp.Problem {
	t.Helper()
	require.Equal(t, status, w.Code, "body: %s", w.Body)
	assert.Equal(t, idemhttp.ProblemContentType, w.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	if typ == idemhttp.ProblemResponseNotStored || typ == idemhttp.ProblemOutcomeUnknown {
		assert.Equal(t, "true", w.Header().Get(idemhttp.ReplayedHeader), "a stored outcome is marked replayed")
	} else {
		assert.Empty(t, w.Header().Get(idemhttp.ReplayedHeader))
	}
	var p idemhttp.Problem
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	assert.Equal(t, typ, p.Type)
	assert.Equal(t, status, p.Status)
	assert.NotEmpty(t, p.Title)
	assert.Regexp(t, `^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, p.Instance)
	if assert.NotNil(t, p.Retryable, "retryable member") {
		assert.Equal(t, w.Header().Get("Retry-After") != "", *p.Retryable, "retryable agrees with Retry-After")
	}
	switch {
	case typ == idemhttp.ProblemTokenUsed, typ == idemhttp.ProblemPayloadReused, typ == idemhttp.ProblemResponseNotStored,
		typ == idemhttp.ProblemOutcomeUnknown:
		assert.Empty(t, w.Header().Get("Retry-After"), "no retry can change this answer")
	case status == http.StatusConflict || status == http.StatusServiceUnavailable:
		assert.NotEmpty(t, w.Header().Get("Retry-After"), "409 and 503 carry Retry-After")
	}
	return p
}

func isReplay(w *httptest.ResponseRecorder) bool {
	return w.Header().Get(idemhttp.ReplayedHeader) == "true"
}

// mustMiddleware unwraps a constructor's result.
func mustMiddleware(t testing.TB) func(func(http.Handler) http.Handler, error) func(http.Handler) http.Handler {
	return func(mw func(http.Handler) http.Handler, err error) func(http.Handler) http.Handler {
		require.NoError(t, err)
		return mw
	}
}

// liveServer serves h behind Idempotency on POST /orders over a real
// connection, with a client that does not decompress.
func liveServer(t *testing.T, h http.HandlerFunc, opts ...idemhttp.Option) (*httptest.Server, *http.Client) {
	t.Helper()
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), append([]idemhttp.Option{byUser}, opts...)...))
	mux := http.NewServeMux()
	mux.Handle("/orders", mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DisableCompression = true
	return srv, &http.Client{Transport: tr}
}

func livePost(t *testing.T, srv *httptest.Server, c *http.Client, key string, trace *httptrace.ClientTrace) (*http.Response, []byte) {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	if trace != nil {
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), trace))
	}
	r.Header.Set(userHeader, "alice")
	r.Header.Set(idemhttp.DefaultKeyHeader, key)
	resp, err := c.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}
