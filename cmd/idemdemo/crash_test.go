package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/redistest"
)

// The crash table of paid orders: the real binary, with -crash-hooks, a
// two-second lease and a 5 s budget per store call (so that a loaded
// machine does not end a claim early), against a payment provider
// running as a process of its own. Each order's first request pauses at a step boundary
// (X-Demo-Pause-After); the test then SIGKILLs the demo there, restarts it
// on the same store and retries until 201, or SIGSTOPs it past its lease,
// retries against a second demo on the same store (which takes the order
// over), and SIGCONTs the first. Per order: one reservation, one charge at
// the provider, the order paid with that charge, every retry answered with
// the first result, and a late answer of the stopped demo never another
// result. A pause inside the charge step, before the call, makes the
// resumed demo send its call with its old fencing token (as a caller that
// does not know it lost its lease): the provider refuses it.
//
// The completer's rows: the first run is SIGKILLed at each boundary and
// the demo restarted with its completer on (-complete-every); no client
// retries until the completer has finished the order, and the client's
// retry then gets the completer's answer, replayed.
//
// bbolt is killed only: a second process cannot open the file while the
// first (stopped, not dead) holds its lock.
func TestPaidOrdersSurviveKillsAndPauses(t *testing.T) {
	bin := buildDemo(t)
	prov := startDemo(t, bin, "provider", "-addr", "127.0.0.1:0", "-log-level", "warn")
	client := &http.Client{Timeout: 20 * time.Second}
	var table []crashRow
	run := func(name, storeURL string, pauses bool) {
		t.Run(name, func(t *testing.T) {
			cr := &crashRun{t: t, bin: bin, prov: prov.url, c: client, store: name,
				args: []string{"-addr", "127.0.0.1:0", "-store", storeURL, "-lease", "2s", "-budget", "5s", "-log-level", "warn",
					"-provider", prov.url, "-crash-hooks", "-complete-every", "0"}}
			if pauses {
				for _, pt := range pausePoints {
					cr.pause(pt)
				}
				for _, pt := range pausePoints {
					cr.pauseComplete(pt)
				}
			}
			for _, pt := range pausePoints {
				cr.kill(pt)
			}
			for _, pt := range pausePoints {
				cr.complete(pt)
			}
			cr.a.kill()
			if cr.b != nil {
				cr.b.kill()
			}
			table = append(table, cr.rows...)
		})
	}
	run("bbolt", "bolt://"+filepath.Join(t.TempDir(), "demo.db"), false)
	srv := redistest.Start(t)
	run("redis", "redis://"+srv.Addr(), true)
	pgURL, _ := pgTestDatabase(t)
	run("postgres", pgURL, true)
	run("mariadb", mariaTestDatabase(t), true)

	stats := providerStats(t, client, prov.url)
	assert.Zero(t, stats.DoubleCharged, "no key was charged twice")
	assert.Equal(t, len(table), stats.Charges, "one charge per order")
	var b strings.Builder
	fmt.Fprintln(&b, "| Store | Crash | Point | Orders | Charge calls | Charges | Double charges | Stale calls refused |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range table {
		fmt.Fprintf(&b, "| %s | %s | %s | 1 | %d | %d | %d | %d |\n", r.store, r.crash, r.point, r.calls, r.charges, max(r.charges-1, 0), r.stale)
	}
	t.Logf("provider: %d calls passed the fence, %d charges, %d stale calls refused\n%s", stats.Calls, stats.Charges, stats.StaleFences, b.String())
}

// crashRow is one order of the crash table.
type crashRow struct {
	store, crash, point   string
	calls, charges, stale int
}

// crashRun drives one store's orders: a is the demo the first request of
// each order goes to, b the second demo of the pauses.
type crashRun struct {
	t     *testing.T
	bin   string
	args  []string
	prov  string
	c     *http.Client
	store string
	a, b  *demoProcess
	rows  []crashRow
}

// paidAnswer is an answer to POST /orders/paid, or the error that cut it.
type paidAnswer struct {
	r   httpResponse
	err error
}

// order returns the user and key of the order of crash at point.
func (cr *crashRun) order(crash, point string) (user, key string) {
	return cr.store + "-" + crash + "-" + point, "order-" + point
}

// postPaid sends POST /orders/paid; a cut connection is an error.
func postPaid(c *http.Client, url, user, key string, header ...string) paidAnswer {
	req, err := http.NewRequest(http.MethodPost, url+"/orders/paid", strings.NewReader(`{"sku":"book","qty":2}`))
	if err != nil {
		return paidAnswer{err: err}
	}
	req.Header.Set(userHeader, user)
	req.Header.Set(idemhttp.DefaultKeyHeader, key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return paidAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return paidAnswer{r: httpResponse{status: resp.StatusCode, header: resp.Header, body: b}, err: err}
}

// startPaused sends the order's first request to p, pausing at point, and
// returns once p logged the pause.
func (cr *crashRun) startPaused(p *demoProcess, user, key, point string, header ...string) <-chan paidAnswer {
	cr.t.Helper()
	before := strings.Count(p.stderr.String(), crashHookLog)
	answer := make(chan paidAnswer, 1)
	go func() {
		answer <- postPaid(cr.c, p.url, user, key, append([]string{pauseAfterHeader, point}, header...)...)
	}()
	require.Eventually(cr.t, func() bool { return strings.Count(p.stderr.String(), crashHookLog) > before },
		20*time.Second, 5*time.Millisecond, "the demo never paused at %s; stderr:\n%s", point, p.stderr)
	return answer
}

// retryUntilCreated retries the order at url, as a client would, until
// 201: a 409 in progress or a 503 is retried, anything else fails.
func (cr *crashRun) retryUntilCreated(url, user, key string) httpResponse {
	cr.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := postPaid(cr.c, url, user, key)
		switch {
		case a.err == nil && a.r.status == http.StatusCreated:
			return a.r
		case time.Now().After(deadline):
			cr.t.Fatalf("no 201 for %s within 20s: last %d %s %v", user, a.r.status, a.r.body, a.err)
		case a.err == nil && a.r.status != http.StatusConflict && a.r.status != http.StatusServiceUnavailable:
			cr.t.Fatalf("retry of %s: %d %s", user, a.r.status, a.r.body)
		}
		time.Sleep(20 * time.Millisecond) // a client's retry delay, not a wait for a condition
	}
}

// launchA starts the demo a, if it is not running.
func (cr *crashRun) launchA() {
	if cr.a == nil || cr.a.hasExited() {
		cr.a = startDemo(cr.t, cr.bin, cr.args...)
	}
}

// kill places an order whose first run is SIGKILLed at point, restarts
// the demo on the same store, retries until 201 and checks the order.
func (cr *crashRun) kill(point string) {
	t := cr.t
	cr.launchA()
	before := providerStats(t, cr.c, cr.prov)
	user, key := cr.order("kill", point)
	answer := cr.startPaused(cr.a, user, key, point)
	cr.a.kill()
	cut := <-answer
	require.Error(t, cut.err, "the paused request must be cut off by the kill (status %d)", cut.r.status)
	cr.a = startDemo(t, cr.bin, cr.args...)
	first := cr.retryUntilCreated(cr.a.url, user, key)
	cr.check("SIGKILL", point, user, key, first, before)
}

// complete places an order whose first run is SIGKILLed at point, then
// restarts the demo with its completer, waits for the completer to
// finish the order, and only then retries it as its client.
func (cr *crashRun) complete(point string) {
	t := cr.t
	cr.launchA()
	before := providerStats(t, cr.c, cr.prov)
	user, key := cr.order("completer", point)
	answer := cr.startPaused(cr.a, user, key, point)
	cr.a.kill()
	cut := <-answer
	require.Error(t, cut.err, "the paused request must be cut off by the kill (status %d)", cut.r.status)
	completing := startDemo(t, cr.bin, cr.completerArgs()...)
	cr.a = completing // check retries here; the next order's launchA starts a demo without a completer
	defer completing.kill()
	cr.waitResumed(completing, point)
	retry := postPaid(cr.c, completing.url, user, key)
	require.NoError(t, retry.err)
	require.Equal(t, http.StatusCreated, retry.r.status, string(retry.r.body))
	assert.Equal(t, "true", retry.r.header.Get(idemhttp.ReplayedHeader), "the client's retry replays the completer's answer")
	cr.check("SIGKILL, completer", point, user, key, retry.r, before)
}

// completerArgs are the demo's arguments with its completer on.
func (cr *crashRun) completerArgs() []string {
	return append(slices.Clip(cr.args[:len(cr.args)-2]), "-complete-every", "100ms", "-complete-after", "1s")
}

// waitResumed waits until the completer of p counted one resumed order.
func (cr *crashRun) waitResumed(p *demoProcess, point string) {
	cr.t.Helper()
	resumed := regexp.MustCompile(`idemkit_completer_operations_total\{[^}]*idemkit_completer_outcome="resumed"[^}]*\} 1`)
	require.Eventually(cr.t, func() bool {
		return resumed.Match(doHTTP(cr.t, cr.c, http.MethodGet, p.url+"/metrics", "", "").body)
	}, 20*time.Second, 50*time.Millisecond, "the completer's metrics never counted the order stopped at %s as resumed", point)
}

// stopA SIGSTOPs demo a and returns the function that SIGCONTs it (once;
// the test's cleanup calls it too).
func (cr *crashRun) stopA() (resume func()) {
	pid := cr.a.cmd.Process.Pid
	require.NoError(cr.t, syscall.Kill(pid, syscall.SIGSTOP))
	var once sync.Once
	resume = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	cr.t.Cleanup(resume)
	return resume
}

// pauseComplete places an order whose first run, on demo a, is
// SIGSTOPped at point past its lease; a second demo's completer finishes
// it; then a is resumed, and the client retries.
func (cr *crashRun) pauseComplete(point string) {
	t := cr.t
	cr.launchA()
	before := providerStats(t, cr.c, cr.prov)
	user, key := cr.order("pause-completer", point)
	answer := cr.startPaused(cr.a, user, key, point, pauseForHeader, "5s")
	resume := cr.stopA()
	completing := startDemo(t, cr.bin, cr.completerArgs()...)
	defer completing.kill()
	cr.waitResumed(completing, point)
	resume()
	late := <-answer
	t.Logf("pause at %s, completer: the resumed demo answered %d %v", point, late.r.status, late.err)
	retry := postPaid(cr.c, completing.url, user, key)
	require.NoError(t, retry.err)
	require.Equal(t, http.StatusCreated, retry.r.status, string(retry.r.body))
	assert.Equal(t, "true", retry.r.header.Get(idemhttp.ReplayedHeader), "the client's retry replays the completer's answer")
	if late.err == nil && late.r.status == http.StatusCreated {
		assert.JSONEq(t, string(retry.r.body), string(late.r.body), "the stopped demo's late 201 is the completer's result")
	}
	cr.check("SIGSTOP, completer", point, user, key, retry.r, before)
}

// pause places an order whose first run, on demo a, is SIGSTOPped at
// point past its lease; demo b takes it over; then a is resumed.
func (cr *crashRun) pause(point string) {
	t := cr.t
	cr.launchA()
	if cr.b == nil {
		cr.b = startDemo(t, cr.bin, cr.args...)
	}
	before := providerStats(t, cr.c, cr.prov)
	user, key := cr.order("pause", point)
	answer := cr.startPaused(cr.a, user, key, point, pauseForHeader, "5s")
	resume := cr.stopA()
	first := cr.retryUntilCreated(cr.b.url, user, key)
	resume()
	late := <-answer
	if late.err == nil && late.r.status == http.StatusCreated {
		assert.JSONEq(t, string(first.body), string(late.r.body), "the stopped demo's late 201 is the first result")
	}
	t.Logf("pause at %s: the resumed demo answered %d %v", point, late.r.status, late.err)
	again := postPaid(cr.c, cr.a.url, user, key)
	require.NoError(t, again.err)
	require.Equal(t, http.StatusCreated, again.r.status, string(again.r.body))
	assert.JSONEq(t, string(first.body), string(again.r.body), "the resumed demo replays the first result")
	cr.check("SIGSTOP", point, user, key, first, before)
}

// check checks an order once its client got first: replayed as it is,
// reserved once, paid with the one charge the provider made for it.
func (cr *crashRun) check(crash, point, user, key string, first httpResponse, before ProviderStats) {
	t := cr.t
	t.Helper()
	var order PaidOrder
	require.NoError(t, json.Unmarshal(first.body, &order))
	assert.Equal(t, statusPaid, order.Status)
	if !strings.Contains(crash, "completer") {
		assert.Empty(t, first.header.Get(idemhttp.ReplayedHeader), "the first 201 comes from a run that took the order over")
	}
	assert.NotEmpty(t, order.Charge)
	replay := postPaid(cr.c, cr.a.url, user, key)
	require.NoError(t, replay.err)
	require.Equal(t, http.StatusCreated, replay.r.status, string(replay.r.body))
	assert.Equal(t, "true", replay.r.header.Get(idemhttp.ReplayedHeader))
	assert.JSONEq(t, string(first.body), string(replay.r.body), "a retry gets the first result")
	r := doHTTP(t, cr.c, http.MethodGet, cr.a.url+"/orders/paid", user, "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var orders []PaidOrder
	require.NoError(t, json.Unmarshal(r.body, &orders))
	assert.Equal(t, []PaidOrder{order}, orders, "one reservation, paid")
	after := providerStats(t, cr.c, cr.prov)
	charges := after.Charges - before.Charges
	assert.Equal(t, 1, charges, "one charge at the provider")
	assert.Equal(t, []string{order.Charge}, after.IDs[len(before.IDs):], "the order is paid with that charge")
	assert.Zero(t, after.DoubleCharged)
	stale := after.StaleFences - before.StaleFences
	if strings.HasPrefix(crash, "SIGSTOP") && point == "charge-call" {
		assert.Equal(t, 1, stale, "the provider refused the resumed demo's call with its old fencing token")
	}
	cr.rows = append(cr.rows, crashRow{store: cr.store, crash: crash, point: point,
		calls: after.Calls - before.Calls + stale, charges: charges, stale: stale})
}

// providerStats reads GET /charges of the provider.
func providerStats(t *testing.T, c *http.Client, url string) ProviderStats {
	t.Helper()
	r := doHTTP(t, c, http.MethodGet, url+"/charges", "", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var s ProviderStats
	require.NoError(t, json.Unmarshal(r.body, &s))
	return s
}
