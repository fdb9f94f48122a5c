package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// goUpstream is an upstream written in Go for the unit tests. Every
// request is counted; headers steer it:
//
//	X-Fail: 500   answer 500
//	X-Block: 1    wait until release is closed (or the request is cancelled)
//	X-Stream: 1   answer server-sent events, waiting on release between them
type goUpstream struct {
	runs    atomic.Int64
	paths   sync.Map // path -> *atomic.Int64
	release chan struct{}
	started chan struct{} // receives one value per blocked request
}

func newGoUpstream(t testing.TB) (*goUpstream, *httptest.Server) {
	u := &goUpstream{release: make(chan struct{}), started: make(chan struct{}, 64)}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv
}

func (u *goUpstream) count(path string) int64 {
	v, ok := u.paths.Load(path)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (u *goUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := u.runs.Add(1)
	v, _ := u.paths.LoadOrStore(r.URL.Path, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Header.Get("Upgrade") != "":
		u.upgrade(w, r.Header.Get("Upgrade"))
		return
	case r.Header.Get("X-Stream") != "":
		u.stream(w, r)
		return
	case r.Header.Get("X-Block") != "":
		u.started <- struct{}{}
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
	}
	if r.Header.Get("X-Fail") != "" {
		http.Error(w, "backend failure", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Order-Id", strconv.FormatInt(n, 10))
	h.Set("X-Not-Replayed", "fresh only")
	h.Set("Set-Cookie", "session=abc; HttpOnly")
	h.Set("Connection", "X-Hop") // X-Hop belongs to this connection only
	h.Set("X-Hop", "connection-specific")
	w.WriteHeader(http.StatusCreated)
	// Two writes with a flush between: a chunked response, which
	// ReverseProxy flushes as it goes.
	fmt.Fprintf(w, `{"run":%d,`, n)
	http.NewResponseController(w).Flush()
	fmt.Fprintf(w, `"got":%q}`, body)
}

// stream answers two server-sent events, the second after release.
func (u *goUpstream) stream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "data: one\n\n")
	http.NewResponseController(w).Flush()
	select {
	case <-u.release:
	case <-r.Context().Done():
		return
	}
	fmt.Fprint(w, "data: two\n\n")
}

// upgrade switches to the protocol asked for, which echoes lines.
func (u *goUpstream) upgrade(w http.ResponseWriter, proto string) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprint(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "+proto+"\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	line, err := brw.ReadString('\n')
	if err != nil {
		return
	}
	fmt.Fprint(brw, "echo "+line)
	brw.Flush()
}

func TestKeyReplayIsByteIdenticalWithAllowListedHeaders(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	first, b1 := send(t, srv.URL+"/orders", "POST", "alice", "k1", `{"sku":"a"}`)
	wantStatus(t, first, b1, http.StatusCreated)
	second, b2 := send(t, srv.URL+"/orders", "POST", "alice", "k1", `{"sku":"a"}`)
	wantStatus(t, second, b2, http.StatusCreated)
	if up.runs.Load() != 1 {
		t.Fatalf("upstream ran %d times, want 1", up.runs.Load())
	}
	if string(b1) != string(b2) || string(b1) != `{"run":1,"got":"{\"sku\":\"a\"}"}` {
		t.Fatalf("replay body %q, first %q", b2, b1)
	}
	if second.Header.Get(idemhttp.ReplayedHeader) != "true" || first.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("replayed header: first %q, second %q", first.Header.Get(idemhttp.ReplayedHeader), second.Header.Get(idemhttp.ReplayedHeader))
	}
	for _, h := range []string{"Content-Type", "X-Order-Id"} {
		if second.Header.Get(h) != first.Header.Get(h) || first.Header.Get(h) == "" {
			t.Errorf("%s: first %q, replay %q", h, first.Header.Get(h), second.Header.Get(h))
		}
	}
	// A header the upstream's Connection names is hop-by-hop: never
	// forwarded nor replayed, even when allow-listed.
	if first.Header.Get("X-Hop") != "" || second.Header.Get("X-Hop") != "" {
		t.Errorf("X-Hop: first %q, replay %q", first.Header.Get("X-Hop"), second.Header.Get("X-Hop"))
	}
	// Set-Cookie and headers off the allow-list are on the fresh response only.
	for _, h := range []string{"Set-Cookie", "X-Not-Replayed"} {
		if first.Header.Get(h) == "" || second.Header.Get(h) != "" {
			t.Errorf("%s: first %q, replay %q", h, first.Header.Get(h), second.Header.Get(h))
		}
	}
	// Another principal with the same key is another request.
	other, b3 := send(t, srv.URL+"/orders", "POST", "bob", "k1", `{"sku":"a"}`)
	wantStatus(t, other, b3, http.StatusCreated)
	if up.runs.Load() != 2 || other.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("bob's request: upstream runs %d, replayed %q", up.runs.Load(), other.Header.Get(idemhttp.ReplayedHeader))
	}
}

func TestKeyRacingDuplicatesRunOnce(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	const n = 32
	var wg sync.WaitGroup
	var created, conflicts, other atomic.Int64
	for range n {
		wg.Go(func() {
			res, body := send(t, srv.URL+"/orders", "POST", "alice", "race", `{}`, "X-Block", "1")
			switch {
			case res.StatusCode == http.StatusCreated:
				created.Add(1)
			case res.StatusCode == http.StatusConflict && res.Header.Get("Retry-After") != "":
				conflicts.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected %d %s", res.StatusCode, body)
			}
		})
	}
	<-up.started // the winner is in the upstream
	// Every loser has its 409 before the winner is let go.
	testkit.WaitFor(t, "every loser's 409", func() bool { return conflicts.Load() >= n-1 || other.Load() != 0 })
	close(up.release)
	wg.Wait()
	if up.runs.Load() != 1 || created.Load() != 1 || conflicts.Load() != n-1 {
		t.Fatalf("upstream runs %d, 201s %d, 409s %d; want 1, 1, %d", up.runs.Load(), created.Load(), conflicts.Load(), n-1)
	}
}

func TestUpstream5xxIsNotStored(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/orders", "POST", "alice", "k5", `{}`, "X-Fail", "500")
	wantStatus(t, res, b, http.StatusInternalServerError)
	res, b = send(t, srv.URL+"/orders", "POST", "alice", "k5", `{}`)
	wantStatus(t, res, b, http.StatusCreated)
	if up.runs.Load() != 2 || res.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("upstream runs %d (want 2), replayed %q", up.runs.Load(), res.Header.Get(idemhttp.ReplayedHeader))
	}
}

// TestUpstreamDownIsNotStored: an upstream that cannot be reached never
// saw the request, so its 502 (retryable) is not stored and the key is
// released. (A timeout is another matter: TestUpstreamTimeoutKeepsTheKey.)
func TestUpstreamDownIsNotStored(t *testing.T) {
	down := parseConfig(t, baseConfig, "http://127.0.0.1:1", "mem://")
	dsrv, _ := startProxy(t, down)
	res, b := send(t, dsrv.URL+"/orders", "POST", "alice", "kd", `{}`)
	wantStatus(t, res, b, http.StatusBadGateway)
	var prob idemhttp.Problem
	if err := json.Unmarshal(b, &prob); err != nil || prob.Retryable == nil || !*prob.Retryable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("502: %v %s (%v)", res.Header, b, err)
	}
	res, b = send(t, dsrv.URL+"/orders", "POST", "alice", "kd", `{}`)
	wantStatus(t, res, b, http.StatusBadGateway) // not a replay of a stored 502, nor a 409
	if res.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatal("a 502 was replayed")
	}
}

func TestSetCookieModes(t *testing.T) {
	for _, tc := range []struct {
		mode          string
		fresh, replay bool
	}{{"fresh", true, false}, {"replay", true, true}, {"strip", false, false}} {
		t.Run(tc.mode, func(t *testing.T) {
			_, us := newGoUpstream(t)
			cfg := parseConfig(t, `
[principal]
source = "header"
header = "X-User"
[[route]]
match = "POST /orders"
mode = "key"
set_cookie = "`+tc.mode+`"
`, us.URL, "mem://")
			srv, _ := startProxy(t, cfg)
			first, _ := send(t, srv.URL+"/orders", "POST", "alice", "c", `{}`)
			second, _ := send(t, srv.URL+"/orders", "POST", "alice", "c", `{}`)
			if got := first.Header.Get("Set-Cookie") != ""; got != tc.fresh {
				t.Errorf("fresh Set-Cookie present %v, want %v", got, tc.fresh)
			}
			if got := second.Header.Get("Set-Cookie") != ""; got != tc.replay {
				t.Errorf("replay Set-Cookie present %v, want %v", got, tc.replay)
			}
		})
	}
}

func TestServerSentEventsPassThroughUnguardedAndAreCounted(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, p := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{}`))
	req.Header.Set("X-User", "alice")
	req.Header.Set("Idempotency-Key", "sse")
	req.Header.Set("X-Stream", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	// The first event arrives while the upstream still holds the stream
	// open: the proxy does not buffer it.
	br := bufio.NewReader(res.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(up.release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("rest of the stream %q", rest)
	}
	if p.streams.Load() != 1 {
		t.Fatalf("streams counted %d, want 1", p.streams.Load())
	}
	h, hb := send(t, srv.URL+"/healthz", "GET", "", "", "")
	wantStatus(t, h, hb, http.StatusOK)
	var health map[string]any
	if err := json.Unmarshal(hb, &health); err != nil || health["streams_unguarded"] != float64(1) {
		t.Fatalf("health %s (%v)", hb, err)
	}
}

func TestRequestBodiesAreBounded(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	big := strings.Repeat("x", 17)
	res, b := send(t, srv.URL+"/small", "POST", "alice", "big", big)
	wantStatus(t, res, b, http.StatusRequestEntityTooLarge)
	res, b = send(t, srv.URL+"/free", "POST", "alice", "", big)
	wantStatus(t, res, b, http.StatusRequestEntityTooLarge)
	if up.runs.Load() != 0 {
		t.Fatalf("upstream saw %d oversized requests", up.runs.Load())
	}
	res, b = send(t, srv.URL+"/free", "POST", "", "", "small")
	wantStatus(t, res, b, http.StatusCreated)
}

func TestGuardedRoutesNeedAPrincipal(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	for _, path := range []string{"/orders", "/quick", "/tokens", "/form"} {
		res, b := send(t, srv.URL+path, "POST", "", "k", `{}`)
		wantStatus(t, res, b, http.StatusUnauthorized)
	}
	if up.runs.Load() != 0 {
		t.Fatalf("upstream ran %d unauthenticated requests", up.runs.Load())
	}
	// Pass-through routes and unrouted requests need none.
	res, b := send(t, srv.URL+"/free", "POST", "", "", "")
	wantStatus(t, res, b, http.StatusCreated)
	res, b = send(t, srv.URL+"/elsewhere", "GET", "", "", "")
	wantStatus(t, res, b, http.StatusCreated)
}

func TestHealthIsTheProxysOwn(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/healthz", "GET", "", "", "")
	wantStatus(t, res, b, http.StatusOK)
	if up.count("/healthz") != 0 || !strings.Contains(string(b), `"status":"ok"`) {
		t.Fatalf("health reached the upstream (%d) or said %s", up.count("/healthz"), b)
	}
}

// The proxy serves idemkit's metrics on /metrics, never forwarded: after a
// first request and its replay, the counters say so.
func TestMetricsAreTheProxysOwn(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	for range 2 {
		res, b := send(t, srv.URL+"/orders", "POST", "alice", "k-1", `{"sku":"a"}`)
		wantStatus(t, res, b, http.StatusCreated)
	}
	res, b := send(t, srv.URL+"/metrics", "GET", "", "", "")
	wantStatus(t, res, b, http.StatusOK)
	for _, want := range []string{`idemkit_mode="do",idemkit_outcome="admitted"`, `idemkit_mode="do",idemkit_outcome="replayed"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, b)
		}
	}
	if up.count("/metrics") != 0 || strings.Contains(string(b), "alice") || strings.Contains(string(b), "k-1") {
		t.Fatalf("metrics reached the upstream (%d) or hold a principal or key", up.count("/metrics"))
	}
}

func TestWindowRejectsRepeats(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/quick", "POST", "alice", "", `{"sku":"a","timestamp":1}`)
	wantStatus(t, res, b, http.StatusCreated)
	res, b = send(t, srv.URL+"/quick", "POST", "alice", "", `{"sku":"a","timestamp":2}`)
	wantStatus(t, res, b, http.StatusConflict)
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("409 without Retry-After")
	}
	// A failed submit is released at once.
	res, b = send(t, srv.URL+"/quick", "POST", "alice", "", `{"sku":"b"}`, "X-Fail", "500")
	wantStatus(t, res, b, http.StatusInternalServerError)
	res, b = send(t, srv.URL+"/quick", "POST", "alice", "", `{"sku":"b"}`)
	wantStatus(t, res, b, http.StatusCreated)
	if up.runs.Load() != 3 {
		t.Fatalf("upstream runs %d, want 3", up.runs.Load())
	}
}

func TestTokensAreIssuedByTheProxyAndSpentOnce(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, baseConfig, us.URL, "mem://"))
	res, b := send(t, srv.URL+"/tokens", "POST", "alice", "", "")
	wantStatus(t, res, b, http.StatusCreated)
	var tok idemhttp.IssuedToken
	if err := json.Unmarshal(b, &tok); err != nil || tok.Token == "" {
		t.Fatalf("token body %s: %v", b, err)
	}
	if up.count("/tokens") != 0 {
		t.Fatal("the token route reached the upstream")
	}
	res, b1 := send(t, srv.URL+"/form", "POST", "alice", "", "a=1", "Idempotency-Token", tok.Token)
	wantStatus(t, res, b1, http.StatusCreated)
	res, b2 := send(t, srv.URL+"/form", "POST", "alice", "", "a=1", "Idempotency-Token", tok.Token)
	wantStatus(t, res, b2, http.StatusCreated)
	if string(b1) != string(b2) || res.Header.Get(idemhttp.ReplayedHeader) != "true" || up.count("/form") != 1 {
		t.Fatalf("reuse: body %q vs %q, replayed %q, upstream runs %d", b2, b1, res.Header.Get(idemhttp.ReplayedHeader), up.count("/form"))
	}
	res, b = send(t, srv.URL+"/form", "POST", "bob", "", "a=1", "Idempotency-Token", tok.Token)
	wantStatus(t, res, b, http.StatusBadRequest)
}
