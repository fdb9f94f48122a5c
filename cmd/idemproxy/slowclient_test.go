package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveProxy serves cfg as run does (p.serve, with its server timeouts)
// on a loopback listener and returns the address.
func serveProxy(t *testing.T, cfg *config) string {
	t.Helper()
	st, err := openStores(context.Background(), cfg.Store, cfg.StoreBudget.Duration, cfg.fallback(), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p, err := newProxy(cfg, st, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-done })
	return ln.Addr().String()
}

// trickle sends head, then one byte of more every 50ms, until the proxy
// answers or closes the connection, or limit passes. It returns how long
// the proxy held the connection and the status it answered with (0 for
// none).
func trickle(t *testing.T, addr, head, more string, limit time.Duration) (time.Duration, int) {
	t.Helper()
	// The server's header timeout runs from when it accepts the
	// connection, which may be before Dial returns here: the clock starts
	// before the dial, so held is never shorter than the server's bound.
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(start.Add(limit))
	answered := make(chan int, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		answered <- res.StatusCode
	}()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case status := <-answered:
			return time.Since(start), status
		case <-tick.C:
			if i < len(more) {
				if _, err := conn.Write([]byte{more[i]}); err != nil {
					return time.Since(start), <-answered
				}
			}
		}
	}
}

// TestSlowClientsAreCutOff: a client that sends its headers or its body
// one byte at a time is answered or disconnected once read_header_timeout
// or body_timeout has passed, on guarded, pass and unrouted paths alike,
// instead of holding its connection (and a handler) for as long as it
// likes.
func TestSlowClientsAreCutOff(t *testing.T) {
	_, us := newGoUpstream(t)
	cfg := parseConfig(t, `
read_header_timeout = "300ms"
body_timeout = "300ms"
`+baseConfig+`
[[route]]
match = "POST /uploads"
mode = "pass"
body_timeout = "600ms"
`, us.URL, "mem://")
	addr := serveProxy(t, cfg)
	const limit = 5 * time.Second // far past every timeout; the test fails if it is reached
	body := func(path string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nX-User: alice\r\nIdempotency-Key: slow\r\nContent-Length: 200\r\n\r\n", path)
	}
	filler := string(make([]byte, 200))
	for _, tc := range []struct {
		name, head, more string
		bound            time.Duration
		status           int
	}{
		{"headers", "POST /orders HTTP/1.1\r\n", "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 300 * time.Millisecond, http.StatusBadRequest},
		{"guarded body", body("/orders"), filler, 300 * time.Millisecond, http.StatusBadRequest},
		{"window body", body("/quick"), filler, 300 * time.Millisecond, http.StatusBadRequest},
		{"pass body (route's own timeout)", body("/uploads"), filler, 600 * time.Millisecond, http.StatusRequestTimeout},
		{"unrouted body", body("/elsewhere"), filler, 300 * time.Millisecond, http.StatusRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, status := trickle(t, addr, tc.head, tc.more, limit)
			if held >= limit/2 || held < tc.bound {
				t.Fatalf("connection held %v, want about %v", held, tc.bound)
			}
			if status != tc.status && (tc.name != "headers" || status != 0) { // net/http may close without an answer
				t.Fatalf("status %d, want %d", status, tc.status)
			}
		})
	}
}

// TestBodyTimeoutDoesNotCutSlowResponses: body_timeout bounds reading the
// request only. A request whose body has arrived is not cut off later,
// however long the upstream then takes.
func TestBodyTimeoutDoesNotCutSlowResponses(t *testing.T) {
	up, us := newGoUpstream(t)
	cfg := parseConfig(t, "body_timeout = \"200ms\"\n"+baseConfig, us.URL, "mem://")
	addr := serveProxy(t, cfg)
	go func() { <-up.started; time.Sleep(500 * time.Millisecond); close(up.release) }()
	res, b := send(t, "http://"+addr+"/orders", "POST", "alice", "k", `{"a":1}`, "X-Block", "1")
	wantStatus(t, res, b, http.StatusCreated)
}
