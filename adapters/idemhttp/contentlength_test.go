package idemhttp_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// contentLengthSizes are body sizes around net/http's HTTP/1 buffer (2048
// bytes, under which the server sets Content-Length itself), its HTTP/2
// buffer (4096), and one far over both.
var contentLengthSizes = []int{0, 1, 2047, 2048, 2049, 4096, 4097, 100_000}

// sizedMux serves, on every path, a response of the status and body size
// the path names ("/201/2048"), for the methods given.
func sizedMux(t *testing.T, methods ...string) http.Handler {
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.WithMethods(methods...),
		idemhttp.WithStorePolicy(idemhttp.StoreAll)))
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var status, size int
		if _, err := fmt.Sscanf(r.URL.Path, "/%d/%d", &status, &size); err != nil {
			t.Errorf("path %q: %v", r.URL.Path, err)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(status)
		_, _ = w.Write(bytes.Repeat([]byte{'b'}, size))
	}))
}

// TestContentLengthOverRealServers sends, over HTTP/1.1 and HTTP/2, each
// response size, status and method twice: the replay must carry the same
// Content-Length as the fresh response and, where a body is allowed, the
// body's length, never a chunked body.
func TestContentLengthOverRealServers(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(sizedMux(t, http.MethodPost, http.MethodHead))
		if h2 {
			srv.EnableHTTP2 = true
			srv.StartTLS()
		} else {
			srv.Start()
		}
		for _, method := range []string{http.MethodPost, http.MethodHead} {
			for _, status := range []int{200, 201, 204, 304} {
				for _, size := range contentLengthSizes {
					what := fmt.Sprintf("h2=%t %s %d, %d bytes", h2, method, status, size)
					send := func() *http.Response {
						r, err := http.NewRequest(method, fmt.Sprintf("%s/%d/%d", srv.URL, status, size), strings.NewReader("x"))
						require.NoError(t, err)
						r.Header.Set(userHeader, "alice")
						r.Header.Set(idemhttp.DefaultKeyHeader, fmt.Sprintf("%s-%d-%d", method, status, size))
						resp, err := srv.Client().Do(r)
						require.NoError(t, err, what)
						defer resp.Body.Close()
						_, err = io.Copy(io.Discard, resp.Body)
						require.NoError(t, err, what)
						require.Equal(t, status, resp.StatusCode, what)
						require.Equal(t, h2, resp.ProtoMajor == 2, what)
						return resp
					}
					fresh, again := send(), send()
					require.Equal(t, []string{"true"}, again.Header.Values(idemhttp.ReplayedHeader), what)
					assert.Equal(t, fresh.ContentLength, again.ContentLength, what)
					assert.Equal(t, fresh.Header.Values("Content-Length"), again.Header.Values("Content-Length"), what)
					assert.Equal(t, fresh.TransferEncoding, again.TransferEncoding, what)
					if status != 204 && status != 304 {
						assert.EqualValues(t, size, again.ContentLength, what)
						assert.Empty(t, again.TransferEncoding, what)
					}
				}
			}
		}
		srv.Close()
	}
}

// TestReplayIsTheFreshResponseOnTheWire reads HTTP/1.1 responses as bytes:
// a replay is the fresh response with the replay header added, header for
// header and in the same order, whatever the body's size.
func TestReplayIsTheFreshResponseOnTheWire(t *testing.T) {
	srv := httptest.NewServer(sizedMux(t, http.MethodPost, http.MethodHead))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, method := range []string{http.MethodPost, http.MethodHead} {
		for _, status := range []int{201, 204} {
			for _, size := range contentLengthSizes {
				what := fmt.Sprintf("%s %d, %d bytes", method, status, size)
				send := func() string {
					_, err := fmt.Fprintf(conn, "%s /%d/%d HTTP/1.1\r\nHost: x\r\n%s: alice\r\n%s: %s-%d-%d\r\n"+
						"Content-Length: 1\r\n\r\nx", method, status, size, userHeader, idemhttp.DefaultKeyHeader, method, status, size)
					require.NoError(t, err)
					var wire bytes.Buffer
					r, err := http.NewRequest(method, "/", nil)
					require.NoError(t, err)
					resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(br, &wire)), r)
					require.NoError(t, err, what)
					_, err = io.Copy(io.Discard, resp.Body)
					require.NoError(t, err, what)
					require.NoError(t, resp.Body.Close())
					var kept []string
					for line := range strings.Lines(wire.String()) {
						if !strings.HasPrefix(line, "Date: ") && !strings.HasPrefix(line, idemhttp.ReplayedHeader+": ") {
							kept = append(kept, line)
						}
					}
					return strings.Join(kept, "")
				}
				fresh, again := send(), send()
				assert.Equal(t, fresh, again, what)
			}
		}
	}
}
