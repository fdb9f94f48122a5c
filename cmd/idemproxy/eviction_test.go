package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// slowUpstream is an upstream that counts its executions by user and key
// and holds each request sent with X-Slow until release is closed, after
// telling started.
type slowUpstream struct {
	mu      sync.Mutex
	runs    map[string]int
	started chan string
	release chan struct{}
	once    sync.Once
}

// newSlowUpstream starts a slowUpstream.
func newSlowUpstream(t *testing.T) (*slowUpstream, string) {
	u := &slowUpstream{runs: map[string]int{}, started: make(chan string, 64), release: make(chan struct{})}
	return u, httptestServer(t, u)
}

// releaseAll lets the held requests, and all later ones, answer.
func (u *slowUpstream) releaseAll() { u.once.Do(func() { close(u.release) }) }

func (u *slowUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("X-User") + "/" + r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	u.runs[id]++
	n := u.runs[id]
	u.mu.Unlock()
	if r.Header.Get("X-Slow") != "" {
		u.started <- id
		<-u.release
	}
	w.Header().Set("X-Order-Id", id+"#"+strconv.Itoa(n))
	w.WriteHeader(http.StatusCreated)
}

func (u *slowUpstream) executions(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[id]
}

// floodKeys completes n keys of user through the proxy, from 8 clients.
func floodKeys(t *testing.T, url, user string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				res, body, err := trySend(url+"/orders", http.MethodPost, user, "flood-"+strconv.Itoa(i), "order")
				if err != nil || res.StatusCode != http.StatusCreated {
					t.Errorf("flood %d: %v %v %s", i, err, res, body)
					return
				}
			}
		})
	}
	wg.Wait()
}

// instrumented starts a proxy over storeURL and returns its URL; the
// proxy's own /metrics reports its memory store's evictions and refusals.
func instrumented(t *testing.T, upstream, storeURL string) string {
	t.Helper()
	srv, _ := startProxy(t, parseConfig(t, baseConfig, upstream, storeURL))
	return srv.URL
}

// metric returns the value of the one sample named name on the proxy's
// GET /metrics, 0 when there is none.
func metric(t *testing.T, proxyURL, name string) float64 {
	t.Helper()
	res, err := http.Get(proxyURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", res.StatusCode, err)
	}
	for l := range strings.Lines(string(body)) {
		if strings.HasPrefix(l, name+"{") {
			v, err := strconv.ParseFloat(strings.TrimSpace(l[strings.LastIndexByte(l, ' ')+1:]), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// TestSlowClaimSurvivesAnotherPrincipalsFlood is issue 27's proxy case: a
// slow request's claim must survive another principal's flood of 2,000
// completed keys in a one-shard memory store of 1,000 entries (so every
// key of the flood competes with the claim); its retry gets 409
// while it runs and the replay after, and the upstream runs it once.
// Before, the flood evicted the claim and the retry ran upstream again.
func TestSlowClaimSurvivesAnotherPrincipalsFlood(t *testing.T) {
	up, upstream := newSlowUpstream(t)
	url := instrumented(t, upstream, "mem://?capacity=1000&shards=1")
	t.Cleanup(up.releaseAll) // before the proxy closes, should the test fail
	first := make(chan *http.Response, 1)
	go func() {
		res, _, err := trySend(url+"/orders", http.MethodPost, "victim", "slow", "order", "X-Slow", "1")
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-up.started

	floodKeys(t, url, "mallory", 2_000)

	res, body := send(t, url+"/orders", http.MethodPost, "victim", "slow", "order")
	wantStatus(t, res, body, http.StatusConflict)
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("409 without Retry-After: %s", body)
	}
	up.releaseAll()
	if res := <-first; res == nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("the slow request: %v", res)
	}
	res, body = send(t, url+"/orders", http.MethodPost, "victim", "slow", "order")
	wantStatus(t, res, body, http.StatusCreated)
	if got := res.Header.Get(idemhttp.ReplayedHeader); got != "true" {
		t.Errorf("the retry after the slow request: %s %q, want a replay", idemhttp.ReplayedHeader, got)
	}
	if n := up.executions("victim/slow"); n != 1 {
		t.Errorf("the slow request ran upstream %d times", n)
	}
	if metric(t, url, "idemkit_evictions_total") == 0 {
		t.Error("the flood evicted nothing: the test proves nothing")
	}
}

// TestFullMemoryStoreRefusesWith503 fills a memory store with slow
// requests' claims: another request is refused with 503 and Retry-After
// and never reaches the upstream, and the refusal is counted; the slow
// requests' retries replay once they end.
func TestFullMemoryStoreRefusesWith503(t *testing.T) {
	up, upstream := newSlowUpstream(t)
	url := instrumented(t, upstream, "mem://?capacity=4&shards=1")
	t.Cleanup(up.releaseAll) // before the proxy closes, should the test fail
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			res, body, err := trySend(url+"/orders", http.MethodPost, "u"+strconv.Itoa(i), "slow", "order", "X-Slow", "1")
			if err != nil || res.StatusCode != http.StatusCreated {
				t.Errorf("slow request %d: %v %v %s", i, err, res, body)
			}
		})
	}
	for range 4 {
		<-up.started
	}
	res, body := send(t, url+"/orders", http.MethodPost, "late", "k", "order")
	wantStatus(t, res, body, http.StatusServiceUnavailable)
	if res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), idemhttp.ProblemUnavailable) {
		t.Errorf("503 without Retry-After or problem type: %v %s", res.Header, body)
	}
	if n := up.executions("late/k"); n != 0 {
		t.Errorf("the refused request ran upstream %d times", n)
	}
	if got := metric(t, url, "idemkit_store_refusals_total"); got != 1 {
		t.Errorf("idemkit_store_refusals_total = %v, want 1", got)
	}
	up.releaseAll()
	wg.Wait()
	for i := range 4 {
		res, body := send(t, url+"/orders", http.MethodPost, "u"+strconv.Itoa(i), "slow", "order")
		wantStatus(t, res, body, http.StatusCreated)
		if res.Header.Get(idemhttp.ReplayedHeader) != "true" || up.executions("u"+strconv.Itoa(i)+"/slow") != 1 {
			t.Errorf("slow request %d: not replayed, or ran %d times", i, up.executions("u"+strconv.Itoa(i)+"/slow"))
		}
	}
	res, body = send(t, url+"/orders", http.MethodPost, "late", "k", "order")
	wantStatus(t, res, body, http.StatusCreated)
}

// TestMemStoreScopeQuotaFromURL caps each principal of a mem:// store at
// scope_quota entries: one principal's 20 keys keep its last 5, evicting
// only its own, and another principal's record still replays.
func TestMemStoreScopeQuotaFromURL(t *testing.T) {
	up, upstream := newSlowUpstream(t)
	url := instrumented(t, upstream, "mem://?scope_quota=5&capacity=1000")
	res, body := send(t, url+"/orders", http.MethodPost, "quiet", "k", "order")
	wantStatus(t, res, body, http.StatusCreated)
	for i := range 20 { // one at a time: 8 at once would be 8 claims over a quota of 5
		res, body := send(t, url+"/orders", http.MethodPost, "busy", "k"+strconv.Itoa(i), "order")
		wantStatus(t, res, body, http.StatusCreated)
	}
	if got := metric(t, url, "idemkit_evictions_total"); got != 15 {
		t.Errorf("idemkit_evictions_total = %v after 20 keys of one principal over a quota of 5, want 15", got)
	}
	res, body = send(t, url+"/orders", http.MethodPost, "quiet", "k", "order")
	wantStatus(t, res, body, http.StatusCreated)
	if res.Header.Get(idemhttp.ReplayedHeader) != "true" || up.executions("quiet/k") != 1 {
		t.Errorf("the quiet principal's retry: not replayed, or ran %d times", up.executions("quiet/k"))
	}
}
