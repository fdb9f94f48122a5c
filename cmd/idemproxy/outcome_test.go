package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// workUpstream is an upstream whose work, once started, always finishes:
// it does not stop when the proxy goes away (a real service commits its
// order whether or not anyone waits for the answer). Each request counts
// as one execution; it waits for release, then answers 201, or with
// X-Reset breaks off its 201 response in the middle of the body.
type workUpstream struct {
	runs    atomic.Int64
	started chan struct{}
	release chan struct{}
	done    chan struct{} // one value per answer written
}

func newWorkUpstream(t *testing.T) (*workUpstream, string) {
	u := &workUpstream{started: make(chan struct{}, 16), release: make(chan struct{}), done: make(chan struct{}, 16)}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	t.Cleanup(u.finish)
	return u, srv.URL
}

// finish lets every blocked execution answer.
func (u *workUpstream) finish() {
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

func (u *workUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.runs.Add(1)
	u.started <- struct{}{}
	defer func() { u.done <- struct{}{} }()
	if r.Header.Get("X-Reset") != "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":`))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the connection is cut mid-body
	}
	<-u.release
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":1}`))
}

const outcomeConfig = `
[principal]
source = "header"
header = "X-User"
[[route]]
match = "POST /orders"
mode = "key"
`

// within waits for ch, failing the test after d.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestClientGivingUpKeepsTheClaim: the client gives up while the upstream
// works. The upstream call goes on, so a retry meanwhile gets 409 with
// Retry-After, not a second execution, and a retry after the upstream has
// answered gets its stored 201.
func TestClientGivingUpKeepsTheClaim(t *testing.T) {
	up, upURL := newWorkUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, outcomeConfig, upURL, "mem://"))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/orders", strings.NewReader(`{}`))
	req.Header.Set("X-User", "alice")
	req.Header.Set("Idempotency-Key", "gone")
	errc := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	within(t, up.started, 10*time.Second, "the upstream to start")
	cancel() // the client gives up (curl -m1)
	<-errc

	// For a while after the client left, every retry finds the claim held.
	deadline := time.Now().Add(time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		res, b, err := trySendTimeout(srv.URL+"/orders", "alice", "gone", 2*time.Second)
		if up.runs.Load() != 1 {
			t.Fatalf("retry %d reached the upstream while the first execution was running (runs %d)", n, up.runs.Load())
		}
		if err != nil {
			t.Fatalf("retry %d: %v", n, err)
		}
		if res.StatusCode != http.StatusConflict || res.Header.Get("Retry-After") == "" {
			t.Fatalf("retry %d while the upstream works: %d %s (Retry-After %q), want 409 with Retry-After",
				n, res.StatusCode, b, res.Header.Get("Retry-After"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	up.finish()
	within(t, up.done, 10*time.Second, "the upstream to answer")
	res, b := retryUntilSettled(t, srv.URL+"/orders", "alice", "gone")
	wantStatus(t, res, b, http.StatusCreated)
	if res.Header.Get(idemhttp.ReplayedHeader) != "true" || string(b) != `{"id":1}` || up.runs.Load() != 1 {
		t.Fatalf("retry after the answer: %s replayed %q, upstream runs %d (want the stored 201, 1 run)",
			b, res.Header.Get(idemhttp.ReplayedHeader), up.runs.Load())
	}
}

// TestUpstreamTimeoutKeepsTheKey: the upstream is slower than
// upstream_timeout. The proxy answers 504, but cannot know whether the
// upstream ran: the key keeps a terminal "outcome unknown" record, so a
// retry gets that problem instead of a second execution.
func TestUpstreamTimeoutKeepsTheKey(t *testing.T) {
	up, upURL := newWorkUpstream(t)
	cfg := parseConfig(t, outcomeConfig, upURL, "mem://")
	cfg.UpstreamTimeout.Duration = 200 * time.Millisecond
	srv, _ := startProxy(t, cfg)
	res, b := send(t, srv.URL+"/orders", "POST", "alice", "slow", `{}`)
	wantStatus(t, res, b, http.StatusGatewayTimeout)
	var prob idemhttp.Problem
	if err := json.Unmarshal(b, &prob); err != nil || prob.Retryable == nil || *prob.Retryable || res.Header.Get("Retry-After") != "" {
		t.Fatalf("504 %s says a retry can succeed (Retry-After %q)", b, res.Header.Get("Retry-After"))
	}
	for i := range 2 {
		res, b, err := trySendTimeout(srv.URL+"/orders", "alice", "slow", 2*time.Second)
		if up.runs.Load() != 1 {
			t.Fatalf("retry %d reached the upstream again (runs %d)", i, up.runs.Load())
		}
		if err != nil {
			t.Fatal(err)
		}
		wantOutcomeUnknown(t, res, b)
		if i == 0 {
			up.finish() // the first execution ends late; nothing changes
			within(t, up.done, 10*time.Second, "the upstream to answer")
		}
	}
}

// TestUpstreamResetAfterItsStatusKeepsTheKey: the upstream sends 201 and
// breaks off the body. It ran, so the key is not released: the client
// gets a 502 problem instead of an empty reply, and a retry gets the
// stored "outcome unknown" problem, not a second execution.
func TestUpstreamResetAfterItsStatusKeepsTheKey(t *testing.T) {
	up, upURL := newWorkUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, outcomeConfig, upURL, "mem://"))
	res, b, err := trySendTimeout(srv.URL+"/orders", "alice", "reset", 10*time.Second, "X-Reset", "1")
	if err != nil {
		t.Fatalf("first request: %v (an empty reply)", err)
	}
	wantStatus(t, res, b, http.StatusBadGateway)
	var prob idemhttp.Problem
	if err := json.Unmarshal(b, &prob); err != nil || prob.Type != problemUpstreamBroken || *prob.Retryable {
		t.Fatalf("first answer %s", b)
	}
	res, b, err = trySendTimeout(srv.URL+"/orders", "alice", "reset", 10*time.Second, "X-Reset", "1")
	if err != nil {
		t.Fatal(err)
	}
	if up.runs.Load() != 1 {
		t.Fatalf("upstream runs %d, want 1", up.runs.Load())
	}
	wantOutcomeUnknown(t, res, b)
}

// wantOutcomeUnknown checks a replayed "outcome unknown" problem.
func wantOutcomeUnknown(t *testing.T, res *http.Response, b []byte) {
	t.Helper()
	var prob idemhttp.Problem
	if err := json.Unmarshal(b, &prob); err != nil || prob.Type != idemhttp.ProblemOutcomeUnknown ||
		res.Header.Get(idemhttp.ReplayedHeader) != "true" || res.Header.Get("Retry-After") != "" {
		t.Fatalf("retry: %d %s replayed %q Retry-After %q, want the replayed outcome-unknown problem",
			res.StatusCode, b, res.Header.Get(idemhttp.ReplayedHeader), res.Header.Get("Retry-After"))
	}
}

// trySendTimeout posts {} with key as user, bounded by d.
func trySendTimeout(url, user, key string, d time.Duration, hdr ...string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{}`))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("X-User", user)
	req.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, rerr := res.Body.Read(buf)
		sb.Write(buf[:n])
		if rerr != nil {
			break
		}
	}
	return res, []byte(sb.String()), nil
}

// retryUntilSettled retries while the first execution is being recorded
// (409), for at most five seconds.
func retryUntilSettled(t *testing.T, url, user, key string) (*http.Response, []byte) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, b := send(t, url, "POST", user, key, `{}`)
		if res.StatusCode != http.StatusConflict || time.Now().After(deadline) {
			return res, b
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConcurrentRetriesWhileTheUpstreamWorks: the first client gives up
// while the upstream works, and 32 clients retry the same key at once,
// again and again, before and after the upstream answers. The upstream
// runs once; every answer is 409 with Retry-After (while it works) or the
// stored 201, replayed (after).
func TestConcurrentRetriesWhileTheUpstreamWorks(t *testing.T) {
	const retriers = 32
	up, upURL := newWorkUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, outcomeConfig, upURL, "mem://"))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/orders", strings.NewReader(`{}`))
	req.Header.Set("X-User", "alice")
	req.Header.Set("Idempotency-Key", "crowd")
	errc := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	within(t, up.started, 10*time.Second, "the upstream to start")
	cancel() // the first client gives up
	<-errc

	var conflicts, replays atomic.Int64
	var retried sync.WaitGroup // each retrier's first answer
	retried.Add(retriers)
	start := make(chan struct{})
	errs := make(chan error, retriers)
	var wg sync.WaitGroup
	for i := range retriers {
		wg.Go(func() {
			<-start
			first := true
			deadline := time.Now().Add(15 * time.Second)
			for n := 0; ; n++ {
				res, b, err := trySendTimeout(srv.URL+"/orders", "alice", "crowd", 5*time.Second)
				if first {
					retried.Done()
					first = false
				}
				switch {
				case err != nil:
					errs <- fmt.Errorf("retrier %d, retry %d: %v", i, n, err)
					return
				case res.StatusCode == http.StatusConflict && res.Header.Get("Retry-After") != "":
					conflicts.Add(1)
				case res.StatusCode == http.StatusCreated && res.Header.Get(idemhttp.ReplayedHeader) == "true" && string(b) == `{"id":1}`:
					replays.Add(1)
					return
				default:
					errs <- fmt.Errorf("retrier %d, retry %d: %d %s (Retry-After %q, replayed %q), want 409 with Retry-After or the replayed 201",
						i, n, res.StatusCode, b, res.Header.Get("Retry-After"), res.Header.Get(idemhttp.ReplayedHeader))
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("retrier %d: no replay after %d retries", i, n+1)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	close(start)
	retried.Wait() // every retrier has been answered once while the upstream works
	// and a few more times
	testkit.WaitFor(t, "more 409s while the upstream works", func() bool { return conflicts.Load() >= 4*retriers })
	up.finish()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := up.runs.Load(); n != 1 {
		t.Fatalf("upstream runs %d, want 1", n)
	}
	if replays.Load() != retriers || conflicts.Load() < 4*retriers {
		t.Fatalf("%d replays (want %d), %d conflicts (want at least %d)", replays.Load(), retriers, conflicts.Load(), 4*retriers)
	}
	t.Logf("%d retries answered 409, %d replays; upstream runs %d", conflicts.Load(), replays.Load(), up.runs.Load())
}
