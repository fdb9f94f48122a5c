package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// pythonBackend runs testdata/orders_backend.py and returns its URL and
// a function that counts its executions per idempotency key.
func pythonBackend(t *testing.T) (string, func() map[string]int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the integration test: apt-get install -y python3")
	}
	execFile := filepath.Join(t.TempDir(), "executions.log")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, py, "testdata/orders_backend.py", execFile)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("backend did not start: %v", err)
	}
	counts := func() map[string]int {
		b, err := os.ReadFile(execFile)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if _, key, ok := strings.Cut(line, " "); ok {
				m[key]++
			}
		}
		return m
	}
	return "http://127.0.0.1:" + strings.TrimSpace(port), counts
}

// integrationConfig gives each store call a generous budget: on a loaded
// machine a call over the default second would answer 503 (fail-closed)
// or leave a completed request's record in progress until its lease
// ends, which is correct but not what the storm checks.
const integrationConfig = `
store_budget = "10s"
[principal]
source = "header"
header = "X-User"

[[route]]
match = "POST /orders"
mode = "key"

[[route]]
match = "POST /orders/quick"
mode = "window"
window = "1m"

[[route]]
match = "POST /tokens"
mode = "issue-token"

[[route]]
match = "POST /orders/form"
mode = "token"
`

// TestTwoProxiesOverOneRedisInFrontOfPython: two idemproxy instances share
// one redis-server in front of a Python backend. A storm of duplicates
// across both runs each logical request once on the backend and every
// answer is that execution's bytes; a 5xx is retried through; a slow
// request gives its concurrent duplicates 409 with Retry-After.
func TestTwoProxiesOverOneRedisInFrontOfPython(t *testing.T) {
	backend, executions := pythonBackend(t)
	redis := redistest.Start(t)
	storeURL := "redis://" + redis.Addr() + "/0"
	a, _ := startProxy(t, parseConfig(t, integrationConfig, backend, storeURL))
	b, _ := startProxy(t, parseConfig(t, integrationConfig, backend, storeURL))
	proxies := []string{a.URL, b.URL}

	t.Run("storm", func(t *testing.T) { storm(t, proxies, executions, "storm") })

	t.Run("5xx retried through", func(t *testing.T) {
		res, body := send(t, a.URL+"/orders", "POST", "alice", "fails-once", `{}`, "X-Fail", "500")
		wantStatus(t, res, body, http.StatusInternalServerError)
		res, body = send(t, b.URL+"/orders", "POST", "alice", "fails-once", `{}`)
		wantStatus(t, res, body, http.StatusCreated)
		if n := executions()["fails-once"]; n != 2 {
			t.Fatalf("executed %d times, want 2 (the 500 must not be stored)", n)
		}
	})

	t.Run("slow backend gives 409 to concurrent duplicates", func(t *testing.T) {
		done := make(chan []byte, 1)
		go func() {
			res, body, err := trySend(a.URL+"/orders", "POST", "alice", "slow", `{}`, "X-Delay", "2")
			if err != nil {
				t.Errorf("slow request: %v", err)
				done <- nil
				return
			}
			if res.StatusCode != http.StatusCreated {
				t.Errorf("slow request: %d %s", res.StatusCode, body)
			}
			done <- body
		}()
		testkit.WaitFor(t, "the slow request to reach the backend", func() bool { return executions()["slow"] != 0 })
		for _, url := range proxies {
			res, body := send(t, url+"/orders", "POST", "alice", "slow", `{}`)
			wantStatus(t, res, body, http.StatusConflict)
			if res.Header.Get("Retry-After") == "" || res.Header.Get("Content-Type") != idemhttp.ProblemContentType {
				t.Fatalf("409 headers %v", res.Header)
			}
		}
		first := <-done
		res, body := send(t, b.URL+"/orders", "POST", "alice", "slow", `{}`)
		wantStatus(t, res, body, http.StatusCreated)
		if string(body) != string(first) || executions()["slow"] != 1 {
			t.Fatalf("after the slow request: %s vs %s, executions %d", body, first, executions()["slow"])
		}
	})

	t.Run("contract", func(t *testing.T) {
		res, body := send(t, a.URL+"/orders", "POST", "alice", "", `{}`)
		wantStatus(t, res, body, http.StatusBadRequest) // key missing
		send(t, a.URL+"/orders", "POST", "alice", "mismatch", `{"sku":"a"}`)
		res, body = send(t, b.URL+"/orders", "POST", "alice", "mismatch", `{"sku":"b"}`)
		wantStatus(t, res, body, http.StatusUnprocessableEntity)
		res, body = send(t, a.URL+"/orders/quick", "POST", "alice", "", `{"sku":"q"}`)
		wantStatus(t, res, body, http.StatusCreated)
		res, body = send(t, b.URL+"/orders/quick", "POST", "alice", "", `{"sku":"q"}`)
		wantStatus(t, res, body, http.StatusConflict)
		res, body = send(t, a.URL+"/tokens", "POST", "alice", "", "")
		wantStatus(t, res, body, http.StatusCreated)
		tok := strings.Split(string(body), `"`)[3]
		res, b1 := send(t, b.URL+"/orders/form", "POST", "alice", "", `{}`, "Idempotency-Token", tok)
		wantStatus(t, res, b1, http.StatusCreated)
		res, b2 := send(t, a.URL+"/orders/form", "POST", "alice", "", `{}`, "Idempotency-Token", tok)
		wantStatus(t, res, b2, http.StatusCreated)
		if string(b1) != string(b2) || res.Header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("token reuse: %s vs %s", b2, b1)
		}
		res, body = send(t, a.URL+"/orders", "POST", "", "k", `{}`)
		wantStatus(t, res, body, http.StatusUnauthorized)
	})
}

// TestFailureModeAndFallbackPerRoute: with the store down, a fail-closed
// route answers 503 + Retry-After without reaching the upstream, a
// fail-open route forwards unguarded, and a route with fallback stays
// guarded by the in-process memory tier.
func TestFailureModeAndFallbackPerRoute(t *testing.T) {
	up, us := newGoUpstream(t)
	redis := redistest.Start(t)
	cfg := parseConfig(t, `
store_budget = "300ms"
[principal]
source = "header"
header = "X-User"
[[route]]
match = "POST /closed"
mode = "key"
[[route]]
match = "POST /open"
mode = "key"
failure = "open"
[[route]]
match = "POST /fallback"
mode = "key"
fallback = true
`, us.URL, "redis://"+redis.Addr()+"/0")
	srv, _ := startProxy(t, cfg)
	res, body := send(t, srv.URL+"/healthz", "GET", "", "", "")
	wantStatus(t, res, body, http.StatusOK)
	redis.Stop()

	res, body = send(t, srv.URL+"/closed", "POST", "alice", "c1", `{}`)
	wantStatus(t, res, body, http.StatusServiceUnavailable)
	if res.Header.Get("Retry-After") == "" || up.count("/closed") != 0 {
		t.Fatalf("fail-closed: Retry-After %q, upstream runs %d", res.Header.Get("Retry-After"), up.count("/closed"))
	}
	for range 2 {
		res, body = send(t, srv.URL+"/open", "POST", "alice", "o1", `{}`)
		wantStatus(t, res, body, http.StatusCreated)
	}
	if up.count("/open") != 2 {
		t.Fatalf("fail-open: upstream runs %d, want 2 (unguarded)", up.count("/open"))
	}
	// While the breaker counts the first failures (policy's failure
	// threshold), the route answers as fail-closed; then the fallback
	// tier answers.
	for i := 0; ; i++ {
		res, body = send(t, srv.URL+"/fallback", "POST", "alice", "f0", `{}`)
		if res.StatusCode == http.StatusCreated {
			break
		}
		if res.StatusCode != http.StatusServiceUnavailable || i == 20 {
			t.Fatalf("fallback route before the breaker opened, request %d: %d %s", i, res.StatusCode, body)
		}
	}
	// Then the key stays guarded: one execution, the same bytes on every
	// retry. (A retry can meet the breaker's half-open probe of the
	// primary and get 503; that runs nothing.)
	var first []byte
	created := 0
	for i := 0; created < 3; i++ {
		res, body = send(t, srv.URL+"/fallback", "POST", "alice", "f1", `{}`)
		switch {
		case res.StatusCode == http.StatusCreated && first == nil:
			first = body
			created++
		case res.StatusCode == http.StatusCreated && string(body) == string(first):
			created++
		case res.StatusCode == http.StatusServiceUnavailable && i < 20:
		default:
			t.Fatalf("fallback request %d: %d %s (first answer %s)", i, res.StatusCode, body, first)
		}
	}
	if up.count("/fallback") != 2 { // f0 once, f1 once
		t.Fatalf("fallback: upstream runs %d, want 1", up.count("/fallback"))
	}
	res, body = send(t, srv.URL+"/healthz", "GET", "", "", "")
	wantStatus(t, res, body, http.StatusServiceUnavailable)
}

// storm sends copies of each of a set of logical requests, concurrently,
// spread over the proxies, and checks that each ran once on the backend
// and that every answer is that execution's bytes.
func storm(t *testing.T, proxies []string, executions func() map[string]int, prefix string) {
	const logical, copies = 24, 8
	type answer struct {
		code         int
		body         string
		replayed, ra bool
	}
	answers := make([][]answer, logical)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range logical {
		for c := range copies {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				key := fmt.Sprintf("%s-%d", prefix, i)
				res, body := send(t, proxies[c%2]+"/orders", "POST", "alice", key, fmt.Sprintf(`{"sku":"s%d"}`, i))
				mu.Lock()
				answers[i] = append(answers[i], answer{res.StatusCode, string(body),
					res.Header.Get(idemhttp.ReplayedHeader) == "true", res.Header.Get("Retry-After") != ""})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	counts := executions()
	var fresh, replays, conflicts int
	for _, as := range answers {
		for _, an := range as {
			switch {
			case an.code == http.StatusConflict:
				conflicts++
			case an.replayed:
				replays++
			default:
				fresh++
			}
		}
	}
	t.Logf("%d requests for %d logical ones: %d fresh, %d replayed, %d in-progress 409s", logical*copies, logical, fresh, replays, conflicts)
	if fresh != logical {
		t.Errorf("%d fresh answers, want %d", fresh, logical)
	}
	for i := range logical {
		key := fmt.Sprintf("%s-%d", prefix, i)
		if counts[key] != 1 {
			t.Errorf("%s executed %d times on the backend, want 1", key, counts[key])
		}
		var first string
		for _, an := range answers[i] {
			switch {
			case an.code == http.StatusCreated:
				if first == "" {
					first = an.body
				} else if an.body != first {
					t.Errorf("%s: answers differ:\n%s\n%s", key, first, an.body)
				}
			case an.code == http.StatusConflict && an.ra:
			default:
				t.Errorf("%s: answer %d %s", key, an.code, an.body)
			}
		}
		// A late retry through either proxy replays the same bytes.
		res, body := send(t, proxies[i%2]+"/orders", "POST", "alice", key, fmt.Sprintf(`{"sku":"s%d"}`, i))
		if res.StatusCode != http.StatusCreated || res.Header.Get(idemhttp.ReplayedHeader) != "true" || (first != "" && string(body) != first) {
			t.Errorf("%s: late retry %d replayed=%q %s, want the stored %s", key, res.StatusCode, res.Header.Get(idemhttp.ReplayedHeader), body, first)
		}
		if res.Header.Get("Location") == "" || res.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s: replay headers Location %q Set-Cookie %q", key, res.Header.Get("Location"), res.Header.Get("Set-Cookie"))
		}
	}
	if executions()[prefix+"-0"] != 1 {
		t.Error("a late retry reached the backend")
	}
}
