package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
)

// TestShutdownKeepsTheKeyOfACutOffRequestForASiblingOverRedis: two proxy
// instances share one redis-server; the first is shut down while a request
// with a one-hour lease runs upstream. The request is cut off after
// shutdown_timeout, but the upstream may have done its work: the key keeps
// the outcome-unknown record in Redis, so the retry on the second instance
// gets that problem, replayed, instead of running again.
func TestShutdownKeepsTheKeyOfACutOffRequestForASiblingOverRedis(t *testing.T) {
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
	wantCutOffAnswer(t, <-got, false)
	res, body = send(t, sibling.URL+"/long", "POST", "alice", "cut-redis", `{}`)
	wantOutcomeUnknownReplay(t, res, body)
	if n := up.count("/long"); n != 1 {
		t.Fatalf("retry on the sibling: upstream runs %d, want 1", n)
	}
}
