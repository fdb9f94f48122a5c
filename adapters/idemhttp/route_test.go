package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store"
)

// chunkedBody hides its length, as a chunked request body does.
type chunkedBody struct{ io.Reader }

func TestBodyCapWithUnknownLength(t *testing.T) {
	const limit = 1000
	for _, n := range []int{0, 1, limit - 1, limit} {
		a := &api{}
		mux := keyMux(t, testkit.NewEngine(t), a, idemhttp.WithMaxBody(limit))
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
		mux := keyMux(t, testkit.NewEngine(t), a, idemhttp.WithMaxBody(limit))
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
	mux := keyMux(t, testkit.NewEngine(t), a)
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
	mux := keyMux(t, testkit.NewEngine(t), &api{})
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

// keyRecorder is a memstore that records every key the engine writes.
type keyRecorder struct {
	store.Store
	mu   sync.Mutex
	keys []string
}

func (s *keyRecorder) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Store.SetNX(ctx, key, v, ttl)
}

func (s *keyRecorder) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// The principal is the engine's scope in every mode: store keys hold only
// digests, never the principal, key or token, and all of one principal's
// keys share one scope (idemkit.ScopeOf), which another principal's never
// do.
func TestPrincipalIsTheEngineScope(t *testing.T) {
	rec := &keyRecorder{Store: testkit.NewMem(t)}
	e := testkit.NewEngineOn(t, rec)
	key := mustMiddleware(t)(idemhttp.Idempotency(e, byUser, idemhttp.WithPayloadWindow(time.Minute)))(&api{})
	window := mustMiddleware(t)(idemhttp.Window(e, byUser))(&api{})
	token := mustMiddleware(t)(idemhttp.Token(e, byUser))(&api{})
	issuer, err := idemhttp.TokenIssuer(e, byUser)
	require.NoError(t, err)
	scopes := map[string]string{}
	var secrets []string
	for _, user := range []string{"principal-alice", "principal-bob"} {
		before := len(rec.taken())
		tok := issue(t, issuer, user)
		require.Equal(t, 201, serve(key, req{user: user, key: "client-key-1", body: "a"}).Code)
		require.Equal(t, 201, serve(window, req{user: user, body: "b"}).Code)
		require.Equal(t, 201, serve(token, req{user: user, token: tok}).Code)
		written := rec.taken()[before:]
		require.Len(t, written, 4, "issue, payload guard, key, window")
		for _, k := range written {
			s := idemkit.ScopeOf(k)
			require.NotEmpty(t, s, k)
			if prev, ok := scopes[user]; ok {
				assert.Equal(t, prev, s, "one scope per principal: %s", k)
			}
			scopes[user] = s
		}
		secrets = append(secrets, user, tok)
	}
	assert.NotEqual(t, scopes["principal-alice"], scopes["principal-bob"])
	for _, k := range rec.taken() {
		for _, s := range append(secrets, "client-key-1", "principal") {
			assert.NotContains(t, k, s)
		}
	}
}

// A principal function that returns "" identifies nobody: 401, as for an
// error, rather than one scope shared by every anonymous caller.
func TestEmptyPrincipalIs401(t *testing.T) {
	anonymous := idemhttp.WithPrincipal(func(*http.Request) (string, error) { return "", nil })
	e := testkit.NewEngine(t)
	for name, mw := range map[string]func(*idemkit.Engine, ...idemhttp.Option) (func(http.Handler) http.Handler, error){
		"Idempotency": idemhttp.Idempotency, "Window": idemhttp.Window, "Token": idemhttp.Token,
	} {
		a := &api{}
		h := mustMiddleware(t)(mw(e, anonymous))(a)
		requireProblem(t, serve(h, req{key: "k", token: "tok_0123456789abcdefghijkl"}), 401, idemhttp.ProblemUnauthenticated)
		assert.Zero(t, a.runs.Load(), name)
	}
	iss, err := idemhttp.TokenIssuer(e, anonymous)
	require.NoError(t, err)
	requireProblem(t, serve(iss, req{}), 401, idemhttp.ProblemUnauthenticated)
}

// Keys are namespaced by transport: the same client key, principal and
// payload given to the engine by another adapter (which starts its keys
// with its own space) or by a direct call is a different key, so neither
// replays the other's result.
func TestKeysAreNamespacedByTransport(t *testing.T) {
	e := testkit.NewEngine(t)
	ctx := context.Background()
	a := &api{}
	mux := keyMux(t, e, a)
	require.Equal(t, 201, serve(mux, req{user: "alice", key: "order-1", body: "x"}).Code)
	ran := false
	_, err := e.Do(ctx, "order-1", "any fingerprint", func(context.Context) ([]byte, error) { ran = true; return []byte("direct"), nil },
		idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.True(t, ran, "a direct call with the same key is not the HTTP request")
	assert.Equal(t, 201, serve(mux, req{user: "alice", key: "order-1", body: "x"}).Code)
	assert.EqualValues(t, 1, a.runs.Load())

	windowed := windowMux(t, e, &api{})
	body := `{"sku":"x"}`
	require.Equal(t, 201, serve(windowed, req{user: "alice", body: body}).Code)
	window, err := keying.NewFingerprinter(keying.WithVolatile(keying.WindowVolatile()...))
	require.NoError(t, err)
	fp := window.Sum("alice", "POST /orders /orders", nil, []byte(body))
	assert.NoError(t, e.Guard(ctx, fp, func(context.Context) error { return nil }, idemkit.WithScope("alice")),
		"a direct guard on the same fingerprint is not the HTTP request")
	requireProblem(t, serve(windowed, req{user: "alice", body: body}), 409, idemhttp.ProblemDuplicate)
}
