package idemhttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestBodiesConcurrentOverAServer sends 32 clients' distinct bodies, with
// and without a Content-Length, of sizes around the pooled buffer and up
// to a server-wide http.MaxBytesHandler limit, through Idempotency (fresh
// run, then replay) and Window over a real connection: every handler must
// see its own body, whole, however the pooled buffers are reused.
func TestBodiesConcurrentOverAServer(t *testing.T) {
	const limit = 9000
	e := testkit.NewEngine(t)
	// The handler answers 201 and its body only when it got the body the
	// client sent: X-Id starts it and X-Len is its length.
	own := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("X-Len") != fmt.Sprint(len(b)) || !bytes.HasPrefix(b, []byte(r.Header.Get("X-Id"))) {
			w.WriteHeader(599)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /key", mustMiddleware(t)(idemhttp.Idempotency(e, byUser, idemhttp.WithMaxStoredResponse(1<<20)))(own))
	mux.Handle("POST /window/{n}", mustMiddleware(t)(idemhttp.Window(e, byUser))(own))
	srv := httptest.NewServer(http.MaxBytesHandler(mux, limit))
	defer srv.Close()
	post := func(target, key, id, body string, chunked bool) (int, string, bool) {
		r, err := http.NewRequest(http.MethodPost, srv.URL+target, strings.NewReader(body))
		require.NoError(t, err)
		if chunked {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), -1
		}
		r.Header.Set(userHeader, "alice")
		r.Header.Set(idemhttp.DefaultKeyHeader, key)
		r.Header.Set("X-Id", id)
		r.Header.Set("X-Len", fmt.Sprint(len(body)))
		resp, err := srv.Client().Do(r)
		if !assert.NoError(t, err) {
			return 0, "", false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		assert.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header.Get(idemhttp.ReplayedHeader) == "true"
	}
	sizes := []int{0, 1, 100, 4094, 4095, 4096, 4097, 5000, limit - 1, limit}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 6 {
				n := sizes[(g+i)%len(sizes)]
				id := fmt.Sprintf("<%d.%d>", g, i)
				body := ""
				if n > 0 {
					id = id[:min(n, len(id))]
					body = id + strings.Repeat(string(rune('a'+g%26)), n-len(id))
				} else {
					id = ""
				}
				chunked := (g+i)%2 == 0
				key := fmt.Sprintf("k%d.%d", g, i)
				for try := range 2 {
					code, got, replayed := post("/key", key, id, body, chunked)
					if !assert.Equal(t, http.StatusCreated, code, "size %d", n) || !assert.Equal(t, body, got, "size %d", n) ||
						!assert.Equal(t, try > 0, replayed) {
						return
					}
				}
				code, got, _ := post(fmt.Sprintf("/window/%d.%d", g, i), "", id, body, chunked)
				if !assert.Equal(t, http.StatusCreated, code, "window, size %d", n) || !assert.Equal(t, body, got, "window, size %d", n) {
					return
				}
			}
		})
	}
	wg.Wait()
	code, _, _ := post("/key", "over", "", strings.Repeat("x", limit+1), true)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, "over the server-wide limit")
}

// TestBodyReadAfterTheHandlerReturns: a handler that reads half its body
// and keeps the reader finds the rest intact after 32 concurrent clients'
// requests and replays have returned their pooled buffers.
func TestBodyReadAfterTheHandlerReturns(t *testing.T) {
	var mu sync.Mutex
	kept := map[string]io.Reader{}
	halves := map[string][]byte{}
	h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		half := make([]byte, r.ContentLength/2)
		_, _ = io.ReadFull(r.Body, half)
		k := r.Header.Get(idemhttp.DefaultKeyHeader)
		mu.Lock()
		kept[k], halves[k] = r.Body, half
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	bodyOf := func(i int) string { return fmt.Sprintf("%04d:%s", i, strings.Repeat(string(rune('a'+i%26)), 100+i*37)) }
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for range 3 {
				w := serve(h, req{user: "alice", key: fmt.Sprint("k", i), body: bodyOf(i)})
				assert.Equal(t, http.StatusCreated, w.Code)
			}
		})
	}
	wg.Wait()
	for i := range 32 {
		k := fmt.Sprint("k", i)
		rest, err := io.ReadAll(kept[k])
		require.NoError(t, err)
		assert.Equal(t, bodyOf(i), string(halves[k])+string(rest))
	}
}

// TestMaxBodyAroundThePooledSize: bodies at, under and over WithMaxBody,
// for limits around the pooled buffer's size, with and without a
// Content-Length.
func TestMaxBodyAroundThePooledSize(t *testing.T) {
	for _, limit := range []int64{100, 4095, 4096, 4097, 8192} {
		h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithMaxBody(limit),
			idemhttp.WithMaxStoredResponse(1<<20)))(echoBody)
		for _, n := range []int64{0, limit - 1, limit, limit + 1, 4095, 4096, 4097} {
			for _, known := range []bool{true, false} {
				body := bytes.Repeat([]byte{'z'}, int(n))
				var rd io.Reader = bytes.NewReader(body)
				if !known {
					rd = onlyReader{rd}
				}
				r := httptest.NewRequest(http.MethodPost, "/orders", rd)
				r.Header.Set(userHeader, "alice")
				r.Header.Set(idemhttp.DefaultKeyHeader, fmt.Sprintf("k%d-%t", n, known))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if n > limit {
					requireProblem(t, w, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
					continue
				}
				require.Equal(t, http.StatusCreated, w.Code, "limit %d, size %d, known %t", limit, n, known)
				assert.True(t, bytes.Equal(body, w.Body.Bytes()), "limit %d, size %d, known %t", limit, n, known)
			}
		}
	}
}

// TestReplayHeaderValuesAreTheReplaysOwn: changing one replay's header
// values, in place or by appending, changes neither the next replay nor
// the stored response.
func TestReplayHeaderValuesAreTheReplaysOwn(t *testing.T) {
	body := strings.Repeat("h", 3000) // over 2048 bytes: Content-Length is in the header map
	h := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithReplayHeaders("X-Tag")))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "/orders/1")
			w.Header()["X-Tag"] = []string{"a", "b"}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, body)
		}))
	q := req{user: "alice", key: "k", body: "x"}
	serve(h, q)
	first := serve(h, q).Header()
	first["X-Tag"][0] = "changed"
	first["X-Tag"] = append(first["X-Tag"], "appended")
	first["Location"][0] = "changed"
	first[idemhttp.ReplayedHeader][0] = "changed"
	first["Content-Length"][0] = "changed"
	second := serve(h, q)
	assert.Equal(t, []string{"a", "b"}, second.Header()["X-Tag"])
	assert.Equal(t, []string{"/orders/1"}, second.Header()["Location"])
	assert.Equal(t, []string{"true"}, second.Header()[idemhttp.ReplayedHeader])
	assert.Equal(t, []string{"3000"}, second.Header()["Content-Length"])
	assert.Equal(t, body, second.Body.String())
}

// TestReplayContentLengthByStatusAndMethod compares, over a real
// connection, the fresh response and its replay for statuses with and
// without a body, and for HEAD.
func TestReplayContentLengthByStatusAndMethod(t *testing.T) {
	for _, status := range []int{200, 201, 202, 204, 205, 304} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodHead} {
			mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithMethods(method),
				idemhttp.WithStorePolicy(idemhttp.StoreAll)))
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, "body!")
			})))
			send := func() (*http.Response, []byte) {
				r, err := http.NewRequest(method, srv.URL, strings.NewReader("x"))
				require.NoError(t, err)
				r.Header.Set(userHeader, "alice")
				r.Header.Set(idemhttp.DefaultKeyHeader, "k")
				resp, err := srv.Client().Do(r)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp, b
			}
			fresh, freshBody := send()
			again, againBody := send()
			srv.Close()
			assert.Equal(t, status, fresh.StatusCode)
			assert.Equal(t, status, again.StatusCode)
			assert.Equal(t, []string{"true"}, again.Header.Values(idemhttp.ReplayedHeader), "%s %d", method, status)
			assert.Equal(t, fresh.ContentLength, again.ContentLength, "%s %d", method, status)
			assert.Equal(t, fresh.Header.Values("Content-Length"), again.Header.Values("Content-Length"), "%s %d", method, status)
			assert.Equal(t, freshBody, againBody, "%s %d", method, status)
		}
	}
}

// TestKeyCharacterClasses: every byte a bare key may hold, alone and
// quoted, at the length limit and among the bytes the store key escapes
// (% : # { } and space), is a key of its own, the same key bare or quoted.
func TestKeyCharacterClasses(t *testing.T) {
	var bare []byte
	for c := byte(0x21); c <= 0x7e; c++ {
		if !strings.ContainsRune(`"(),;<=>?@[\]{}`, rune(c)) {
			bare = append(bare, c)
		}
	}
	a := &api{}
	mux := keyMux(t, testkit.NewEngine(t), a)
	seen := map[string]bool{}
	try := func(header, key string) {
		t.Helper()
		w := serve(mux, req{user: "u", key: header})
		require.Equal(t, http.StatusCreated, w.Code, "key %q: %s", header, w.Body)
		assert.Equal(t, seen[key], isReplay(w), "key %q", header)
		seen[key] = true
		assert.EqualValues(t, len(seen), a.runs.Load(), "key %q", header)
	}
	for _, c := range bare {
		try("k"+string(c), "k"+string(c))
		try(`"k`+string(c)+`"`, "k"+string(c))
	}
	long := strings.Repeat(string(bare), 4)[:idemhttp.MaxKeyLen]
	try(long, long)
	try(`"`+long+`"`, long)
	for _, i := range []int{0, 47, 48, 100, idemhttp.MaxKeyLen - 1} {
		b := []byte(long)
		b[i] ^= 1 // another bare byte: 0-9, a-z and A-Z stay in their class
		if !bytes.Contains(bare, b[i:i+1]) {
			b[i] = 'q'
		}
		try(string(b), string(b))
	}
	for _, k := range [][2]string{{"a:b", "a:b"}, {"a%3Ab", "a%3Ab"}, {"a%253Ab", "a%253Ab"}, {`"a\"b"`, `a"b`},
		{`"a\\b"`, `a\b`}, {`"a b"`, "a b"}, {`"a%20b"`, "a%20b"}, {`"{x}"`, "{x}"}, {`"%"`, "%"},
		{strings.Repeat("%", 48), strings.Repeat("%", 48)}, {strings.Repeat("%", 47) + "#", strings.Repeat("%", 47) + "#"}} {
		try(k[0], k[1])
	}
	w := serve(mux, req{user: "u", header: http.Header{idemhttp.DefaultKeyHeader: {long + "a"}}})
	requireProblem(t, w, http.StatusBadRequest, idemhttp.ProblemKeyInvalid)
}
