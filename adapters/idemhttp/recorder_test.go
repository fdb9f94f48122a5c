package idemhttp_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// net/http ignores header changes made after WriteHeader (or the first
// Write); so must the recorder, for the fresh response and the replay.
func TestRecorderIgnoresHeadersSetAfterTheStatus(t *testing.T) {
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

			srv, c := liveServer(t, h)
			fresh, _ := livePost(t, srv, c, "late", nil)
			again, _ := livePost(t, srv, c, "late", nil)
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
func TestRecorderDropsInformationalAfterFinal(t *testing.T) {
	srv, c := liveServer(t, func(w http.ResponseWriter, _ *http.Request) {
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
	resp, body := livePost(t, srv, c, "hints", trace)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "ok", string(body))
	assert.EqualValues(t, 1, got1xx.Load(), "only the 103 written before the final status is sent")
}

// net/http sends what a handler wrote before it hijacks (a 101 Switching
// Protocols, as websocket libraries write); so must the recorder. The key
// is released (configured) so that both connections are upgraded.
func TestRecorderHijackSendsWhatWasWrittenBefore(t *testing.T) {
	var runs atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithMethods(http.MethodGet),
		idemhttp.WithUnstored(idemhttp.KeepTerminal, idemhttp.ReleaseKey)))
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
func TestRecorderFailedHijackKeepsTheResponseGuarded(t *testing.T) {
	var runs atomic.Int32
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser))
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

// net/http sends the first final status and ignores a second WriteHeader
// (it only logs "superfluous response.WriteHeader call"): a handler that
// writes 201 and then 500 has answered 201, so the client gets 201 and the
// stored record, replayed to a retry, is 201 too, never the overriding 500.
func TestRecorderKeepsTheFirstFinalStatus(t *testing.T) {
	var runs atomic.Int32
	h := func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"id":1}`)
	}
	bare := httptest.NewServer(http.HandlerFunc(h))
	defer bare.Close()
	want, err := bare.Client().Post(bare.URL, "", nil)
	require.NoError(t, err)
	_ = want.Body.Close()
	require.Equal(t, http.StatusCreated, want.StatusCode, "what net/http itself sends")

	srv, c := liveServer(t, h)
	fresh, fb := livePost(t, srv, c, "twice", nil)
	again, ab := livePost(t, srv, c, "twice", nil)
	assert.Equal(t, http.StatusCreated, fresh.StatusCode, "fresh response")
	assert.Equal(t, http.StatusCreated, again.StatusCode, "replay of the stored record")
	assert.Equal(t, "true", again.Header.Get(idemhttp.ReplayedHeader))
	assert.Equal(t, string(fb), string(ab))
	assert.Equal(t, int32(2), runs.Load()) // one through the middleware, one bare
}
