package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// dropUpstream is an upstream written on a raw TCP listener, so that it
// can do what no net/http server does on purpose: read a request fully
// and close the connection without answering. It answers 201 to every
// request, except that a request carrying Idempotency-Key drop-... that
// arrives on a kept-alive connection (not its first request) is read and
// dropped, as an upstream that crashes or restarts after taking the
// request would.
type dropUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn // closed at the end: the proxy keeps its idle ones open
	// got lists, per Idempotency-Key, every arrival: whether the
	// connection was reused, and the framing headers it came with.
	got map[string][]arrival
}

type arrival struct {
	reused        bool
	contentLength []string
	chunked       bool
}

func newDropUpstream(t *testing.T) (*dropUpstream, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &dropUpstream{ln: ln, got: map[string][]arrival{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			_ = c.Close()
		}
		u.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			wg.Go(func() { u.serve(c) })
		}
	})
	return u, "http://" + ln.Addr().String()
}

func (u *dropUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, err = io.Copy(io.Discard, req.Body)
		if err != nil {
			return
		}
		key := req.Header.Get("Idempotency-Key")
		u.mu.Lock()
		u.got[key] = append(u.got[key], arrival{reused: n > 0, contentLength: req.Header.Values("Content-Length"),
			chunked: len(req.TransferEncoding) > 0})
		u.mu.Unlock()
		if n > 0 && strings.HasPrefix(key, "drop-") {
			return // read in full, never answered
		}
		body := `{"id":1}`
		if _, err := fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
	}
}

func (u *dropUpstream) arrivals(key string) []arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]arrival(nil), u.got[key]...)
}

// TestTransportDoesNotResendAGuardedRequest: net/http's Transport takes a
// request with an Idempotency-Key header and no body for replayable, and
// sends it again on a new connection when a reused one fails after the
// request was written. The upstream reads a guarded empty-body POST on a
// kept-alive connection and closes it without answering: the request must
// reach it once, the client gets the outcome-unknown 502, and a retry the
// replayed outcome-unknown problem.
func TestTransportDoesNotResendAGuardedRequest(t *testing.T) {
	up, upURL := newDropUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, outcomeConfig, upURL, "mem://"))

	// The dropped request must come on the connection the previous one
	// left idle; when the Transport had not put it back in its pool yet
	// it opens another, and the trial is made again.
	for trial := range 20 {
		res, b := send(t, srv.URL+"/orders", "POST", "alice", fmt.Sprintf("warm-%d", trial), `{}`)
		wantStatus(t, res, b, http.StatusCreated)
		key := fmt.Sprintf("drop-%d", trial)
		res, b = send(t, srv.URL+"/orders", "POST", "alice", key, "")
		got := up.arrivals(key)
		if len(got) == 0 {
			t.Fatalf("the upstream never got %s (%d %s)", key, res.StatusCode, b)
		}
		if !got[0].reused {
			continue
		}
		if len(got) != 1 {
			t.Fatalf("the upstream got the guarded request %d times (want 1); the client got %d %s", len(got), res.StatusCode, b)
		}
		if a := got[0]; len(a.contentLength) != 1 || a.contentLength[0] != "0" || a.chunked {
			t.Fatalf("the empty body went upstream with Content-Length %q, chunked %v (want Content-Length: 0, not chunked)",
				a.contentLength, a.chunked)
		}
		wantStatus(t, res, b, http.StatusBadGateway)
		var prob idemhttp.Problem
		if err := json.Unmarshal(b, &prob); err != nil || prob.Retryable == nil || *prob.Retryable || res.Header.Get("Retry-After") != "" {
			t.Fatalf("502 %s says a retry can succeed (Retry-After %q)", b, res.Header.Get("Retry-After"))
		}
		res, b = send(t, srv.URL+"/orders", "POST", "alice", key, "")
		wantOutcomeUnknown(t, res, b)
		if n := len(up.arrivals(key)); n != 1 {
			t.Fatalf("after the retry the upstream got the request %d times, want 1", n)
		}
		return
	}
	t.Fatal("no trial sent the request on a reused connection")
}
