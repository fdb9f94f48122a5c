package idemhttp_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// reviewServer serves h behind Idempotency on POST /orders over a real
// connection, with a client that does not decompress.
func reviewServer(t *testing.T, h http.HandlerFunc, opts ...idemhttp.Option) (*httptest.Server, *http.Client) {
	t.Helper()
	mw := mustMiddleware(t)(idemhttp.Idempotency(newEngine(t), append([]idemhttp.Option{byUser}, opts...)...))
	mux := http.NewServeMux()
	mux.Handle("/orders", mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DisableCompression = true
	return srv, &http.Client{Transport: tr}
}

func reviewPost(t *testing.T, srv *httptest.Server, c *http.Client, key string, trace *httptrace.ClientTrace) (*http.Response, []byte) {
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

// A body encoded by the handler (Content-Encoding) means nothing without
// that header: the replay must carry it, or the client gets gzip bytes
// labelled as something else.
func TestReviewReplayKeepsContentEncoding(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"id":42}`))
	require.NoError(t, zw.Close())
	srv, c := reviewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(gz.Bytes())
	})
	fresh, freshBody := reviewPost(t, srv, c, "gz", nil)
	again, againBody := reviewPost(t, srv, c, "gz", nil)
	require.Equal(t, "true", again.Header.Get(idemhttp.ReplayedHeader))
	assert.Equal(t, "gzip", fresh.Header.Get("Content-Encoding"))
	assert.Equal(t, fresh.Header.Values("Content-Encoding"), again.Header.Values("Content-Encoding"))
	assert.Equal(t, fresh.Header.Values("Content-Type"), again.Header.Values("Content-Type"))
	assert.Equal(t, freshBody, againBody)
}

// net/http ignores header changes made after WriteHeader (or the first
// Write); so must the recorder, for the fresh response and the replay.
func TestReviewHeadersAfterWriteHeaderAreIgnored(t *testing.T) {
	for name, commit := range map[string]func(w http.ResponseWriter){
		"WriteHeader":  func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) },
		"implicit 200": func(w http.ResponseWriter) { _, _ = io.WriteString(w, "head ") },
	} {
		t.Run(name, func(t *testing.T) {
			h := func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", "/orders/a")
				w.Header().Set("Content-Type", "text/plain")
				commit(w)
				w.Header().Set("Location", "/orders/b")
				w.Header().Set("X-Late", "1")
				w.Header().Del("Content-Type")
				_, _ = io.WriteString(w, "body")
			}
			// What net/http itself sends.
			bare := httptest.NewServer(http.HandlerFunc(h))
			defer bare.Close()
			want, err := bare.Client().Post(bare.URL, "", nil)
			require.NoError(t, err)
			_ = want.Body.Close()
			require.Equal(t, "/orders/a", want.Header.Get("Location"))

			srv, c := reviewServer(t, h)
			fresh, _ := reviewPost(t, srv, c, "late", nil)
			again, _ := reviewPost(t, srv, c, "late", nil)
			require.Equal(t, "true", again.Header.Get(idemhttp.ReplayedHeader))
			for _, resp := range []*http.Response{fresh, again} {
				assert.Equal(t, want.StatusCode, resp.StatusCode)
				assert.Equal(t, "/orders/a", resp.Header.Get("Location"))
				assert.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
			}
			assert.Empty(t, fresh.Header.Get("X-Late"))
		})
	}
}

// An informational status written after the final one is superfluous in
// net/http; the recorder must not send it ahead of the final status.
func TestReviewInformationalAfterFinalIsNotSent(t *testing.T) {
	srv, c := reviewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints) // sent: before the final status
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusEarlyHints) // superfluous
		_, _ = io.WriteString(w, "ok")
	})
	var got1xx atomic.Int32
	trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error {
		got1xx.Add(1)
		return nil
	}}
	resp, body := reviewPost(t, srv, c, "hints", trace)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "ok", string(body))
	assert.EqualValues(t, 1, got1xx.Load(), "only the 103 written before the final status is sent")
}

// chunkedBody hides its length, as a chunked request body does.
type chunkedBody struct{ io.Reader }

func TestReviewBodyCapWithUnknownLength(t *testing.T) {
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
func TestReviewOuterMaxBytesReaderIs413(t *testing.T) {
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

// A request with a nil Header is valid for http.Transport; the Transport
// must not panic adding a key to it.
func TestReviewTransportNilHeader(t *testing.T) {
	var got string
	tr := &idemhttp.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get(idemhttp.DefaultKeyHeader)
		return status(201, nil, "")()
	})}
	u, err := url.Parse("http://example.test/orders")
	require.NoError(t, err)
	var resp *http.Response
	require.NotPanics(t, func() { resp, err = tr.RoundTrip(&http.Request{Method: http.MethodPost, URL: u}) })
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.NotEmpty(t, got)
}

// closeCounter is a response body that records whether it was closed.
type closeCounter struct {
	io.Reader
	closed *atomic.Int32
}

func (c closeCounter) Close() error { c.closed.Add(1); return nil }

// Every response the transport does not return is closed; the returned
// one is not.
func TestReviewTransportClosesDiscardedResponses(t *testing.T) {
	var closed, attempts atomic.Int32
	tr := &idemhttp.Transport{MinBackoff: time.Millisecond, MaxRetries: 3,
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			if r.Body != nil {
				_, _ = io.Copy(io.Discard, r.Body)
				_ = r.Body.Close()
			}
			return &http.Response{StatusCode: 503, Header: http.Header{},
				Body: closeCounter{strings.NewReader("down"), &closed}}, nil
		})}
	r, err := http.NewRequest(http.MethodPost, "http://example.test/", strings.NewReader("b"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(r)
	require.NoError(t, err)
	assert.EqualValues(t, 4, attempts.Load())
	assert.EqualValues(t, 3, closed.Load(), "the three discarded responses are closed")
	_ = resp.Body.Close()
	assert.EqualValues(t, 4, closed.Load())
}

// Concurrent requests with one key from two principals: each principal's
// handler runs once and nobody ever gets the other's response.
func TestReviewPrincipalsNeverShareResponses(t *testing.T) {
	var runs sync.Map
	mw := mustMiddleware(t)(idemhttp.Idempotency(newEngine(t), byUser, idemhttp.WithWait(time.Millisecond)))
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
}

// net/http sends what a handler wrote before it hijacks (a 101 Switching
// Protocols, as websocket libraries write); so must the recorder, and the
// key is released.
func TestReviewHijackSendsWhatWasWrittenBefore(t *testing.T) {
	var runs atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Idempotency(newEngine(t), byUser, idemhttp.WithMethods(http.MethodGet)))
	guarded := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.Header().Set("Upgrade", "echo")
		w.Header().Set("Connection", "Upgrade")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("after upgrade")
		_ = brw.Flush()
	}))
	served := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guarded.ServeHTTP(w, r)
		served <- struct{}{} // the middleware is done with the key
	}))
	defer srv.Close()
	for i := range 2 {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(conn, "GET /orders HTTP/1.1\r\nHost: x\r\nX-User: alice\r\nIdempotency-Key: up\r\n"+
			"Connection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		require.NoError(t, err)
		got, _ := io.ReadAll(conn)
		_ = conn.Close()
		<-served
		assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 101 Switching Protocols\r\n"), "%q", got)
		assert.True(t, strings.HasSuffix(string(got), "\r\n\r\nafter upgrade"), "%q", got)
		assert.EqualValues(t, i+1, runs.Load(), "a hijacked response releases the key")
	}
}

// noHijack is a writer that cannot hijack, as HTTP/2's.
type noHijack struct{ *httptest.ResponseRecorder }

// Where hijacking is not supported, a handler that tries it and falls back
// to a normal response is still guarded.
func TestReviewFailedHijackKeepsTheResponseGuarded(t *testing.T) {
	var runs atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Idempotency(newEngine(t), byUser))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _, err := http.NewResponseController(w).Hijack()
		assert.ErrorIs(t, err, http.ErrNotSupported)
		_, _ = io.WriteString(w, "fallback")
	}))
	for range 2 {
		w := noHijack{httptest.NewRecorder()}
		h.ServeHTTP(w, req{user: "alice", key: "h2"}.build())
		assert.Equal(t, 201, w.Code)
		assert.Equal(t, "fallback", w.Body.String())
	}
	assert.EqualValues(t, 1, runs.Load())
}

// stalled is a request body whose client declared a length and then sent
// nothing.
type stalled struct{}

func (stalled) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// The declared Content-Length is the client's word: the middleware must not
// allocate the whole cap up front for bytes that never arrive (a few header
// bytes would then pin a megabyte each).
func TestReviewDeclaredLengthIsNotPreallocated(t *testing.T) {
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
