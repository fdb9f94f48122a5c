package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testLog discards logs unless -v is given.
func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// parseConfig writes text to a file and loads it as idemproxy would, with
// upstream and store set.
func parseConfig(t testing.TB, text, upstream, storeURL string) *config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idemproxy.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c := defaults()
	if err := loadFile(&c, path); err != nil {
		t.Fatal(err)
	}
	c.Upstream, c.Store = upstream, storeURL
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	return &c
}

// startProxy builds a proxy from cfg and serves it on a test server.
func startProxy(t testing.TB, cfg *config) (*httptest.Server, *proxy) {
	t.Helper()
	return startProxyLog(t, cfg, testLog(t))
}

// startProxyLog is startProxy with the given logger.
func startProxyLog(t testing.TB, cfg *config, log *slog.Logger) (*httptest.Server, *proxy) {
	t.Helper()
	st, err := openStores(context.Background(), cfg.Store, cfg.StoreBudget.Duration, cfg.fallback(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p, err := newProxy(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv, p
}

// baseConfig has one route of each mode, principal from X-User.
const baseConfig = `
[principal]
source = "header"
header = "X-User"

[[route]]
match = "POST /orders"
mode = "key"
replay_headers = ["X-Order-Id", "X-Hop"]

[[route]]
match = "POST /quick"
mode = "window"
window = "1m"

[[route]]
match = "POST /tokens"
mode = "issue-token"

[[route]]
match = "POST /form"
mode = "token"

[[route]]
match = "POST /small"
mode = "key"
max_body = 16

[[route]]
match = "POST /free"
mode = "pass"
max_body = 16
`

// send makes a request through the proxy and returns the response with its
// body read.
func send(t testing.TB, url, method, user, key, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	res, b, err := trySend(url, method, user, key, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// trySend is send for goroutines other than the test's: it returns the
// error instead of failing the test.
func trySend(url, method, user, key, body string, hdr ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if user != "" {
		req.Header.Set("X-User", user)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// wantStatus fails the test when res has another status.
func wantStatus(t testing.TB, res *http.Response, body []byte, want int) {
	t.Helper()
	if res.StatusCode != want {
		t.Fatalf("status %d, want %d; body %s", res.StatusCode, want, bytes.TrimSpace(body))
	}
}

// httptestServer serves h on a test server and returns its URL.
func httptestServer(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
