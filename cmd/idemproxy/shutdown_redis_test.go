package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
)

// TestShutdownReleasesCutOffClaimsForASiblingOverRedis: two proxy
// instances share one redis-server; the first is shut down while a request
// with a one-hour lease runs. The request is cut off after
// shutdown_timeout, and its claim is released in Redis, so the retry on the
// second instance runs at once instead of getting 409 for an hour.
func TestShutdownReleasesCutOffClaimsForASiblingOverRedis(t *testing.T) {
	up, us := newGoUpstream(t)
	redis := redistest.Start(t)
	text := baseConfig + "\n[[route]]\nmatch = \"POST /long\"\nmode = \"key\"\nlease = \"1h\"\n"
	storeURL := "redis://" + redis.Addr() + "/0"
	cfg := parseConfig(t, text, us.URL, storeURL)
	cfg.ShutdownTimeout.Duration = 200 * time.Millisecond
	p, err := newProxy(cfg, mustStores(t, cfg), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	sibling, _ := startProxy(t, parseConfig(t, text, us.URL, storeURL))

	addr, stop, done := serving(t, p)
	got := sendBlocked(addr+"/long", "cut-redis")
	<-up.started
	// While it runs, the sibling sees the claim.
	res, body := send(t, sibling.URL+"/long", "POST", "alice", "cut-redis", `{}`)
	wantStatus(t, res, body, http.StatusConflict)
	stop() // SIGTERM to the first instance
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.err != nil || a.code != http.StatusBadGateway {
		t.Fatalf("cut-off request got %d %v, want 502", a.code, a.err)
	}
	res, body = send(t, sibling.URL+"/long", "POST", "alice", "cut-redis", `{}`)
	wantStatus(t, res, body, http.StatusCreated)
	if up.count("/long") != 2 || res.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry on the sibling: upstream runs %d (want 2), replayed %q", up.count("/long"), res.Header.Get("Idempotent-Replayed"))
	}
}
