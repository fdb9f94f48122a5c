package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// The end-to-end test: the real binary over a real bbolt file, driven over
// real HTTP, SIGKILLed in the middle of a duplicate storm and restarted on
// the same file. Completed keys still replay and no order is duplicated.
func TestEndToEnd(t *testing.T) {
	bin := buildDemo(t)
	dbPath := filepath.Join(t.TempDir(), "demo.db")
	// A short lease, so that keys left in progress by the kill free
	// themselves quickly after the restart.
	args := []string{"-addr", "127.0.0.1:0", "-store", "bolt://" + dbPath, "-lease", "2s", "-log-level", "warn"}
	c := &http.Client{Timeout: 30 * time.Second}

	p := startDemo(t, bin, args...)
	completed := driveEveryEndpoint(t, c, p.url)
	aliceBefore := listOrdersHTTP(t, c, p.url, "alice")
	stalled := stallOrder(t, c, p.url)
	stormed := stormThenKill(t, p)
	cut := <-stalled.answer
	require.Error(t, cut.err, "the stalled request must be cut off by the kill, not answered (status %d): "+
		"otherwise its key completed and this test no longer covers the crash window", cut.status)

	p = startDemo(t, bin, args...)
	for _, k := range append(completed, stormed.completed...) {
		checkReplayed(t, c, p.url, k)
	}
	assert.Equal(t, aliceBefore, listOrdersHTTP(t, c, p.url, "alice"), "the restart kept every order and added none")
	checkStalledOrder(t, c, p.url, stalled)
	checkStormedOrders(t, c, p.url, stormed)

	// The restarted service is whole: a new storm makes one order per
	// submission in every mode.
	results, err := storm(context.Background(), stormConfig{baseURL: p.url, copies: 20, users: 3})
	require.NoError(t, err)
	require.NoError(t, checkStormResults(results))

	checkGracefulStop(t, c, p)
	checkStoreDown(t, c, bin)
}

// buildDemo builds the binary into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idemdemo")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// demoProcess is a running idemdemo binary.
type demoProcess struct {
	cmd            *exec.Cmd
	url            string
	stdout, stderr *syncBuffer
	exited         chan struct{}
	exitErr        error
}

var bannerURL = regexp.MustCompile(`listening on (http://\S+)`)

// startDemo starts the binary, reads its URL from the banner and waits for
// /healthz. The process is killed when the test ends.
func startDemo(t *testing.T, bin string, args ...string) *demoProcess {
	t.Helper()
	p := launchDemo(t, bin, args...)
	c := &http.Client{Timeout: time.Second}
	require.Eventually(t, func() bool {
		resp, err := c.Get(p.url + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond, "/healthz never answered 200; stderr:\n%s", p.stderr)
	return p
}

// launchDemo starts the binary and reads its URL from the banner. The
// process is killed when the test ends.
func launchDemo(t *testing.T, bin string, args ...string) *demoProcess {
	t.Helper()
	p := &demoProcess{cmd: exec.Command(bin, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	require.Eventually(t, func() bool { return bannerURL.MatchString(p.stdout.String()) || p.hasExited() },
		20*time.Second, 10*time.Millisecond)
	if p.hasExited() {
		t.Fatalf("idemdemo exited: %v\n%s", p.exitErr, p.stderr)
	}
	p.url = bannerURL.FindStringSubmatch(p.stdout.String())[1]
	return p
}

func (p *demoProcess) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the process (no shutdown, no flush, no closing of
// the bbolt file) and waits until it is gone.
func (p *demoProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// keyedRequest is a POST /orders that completed, and its response body.
type keyedRequest struct {
	user, key, body string
	response        []byte
}

// postHTTP sends POST path over real HTTP.
func postHTTP(t *testing.T, c *http.Client, url, path, user, body string, header ...string) httpResponse {
	t.Helper()
	return doHTTP(t, c, http.MethodPost, url+path, user, body, header...)
}

// listOrdersHTTP returns user's orders.
func listOrdersHTTP(t *testing.T, c *http.Client, url, user string) []Order {
	t.Helper()
	r := doHTTP(t, c, http.MethodGet, url+"/orders", user, "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var orders []Order
	require.NoError(t, json.Unmarshal(r.body, &orders))
	return orders
}

// driveEveryEndpoint sends each endpoint the requests behind each of its
// statuses and returns the keyed requests that completed.
func driveEveryEndpoint(t *testing.T, c *http.Client, url string) []keyedRequest {
	t.Helper()
	var done []keyedRequest
	post := func(path, user, body string, header ...string) httpResponse {
		return postHTTP(t, c, url, path, user, body, header...)
	}
	want := func(r httpResponse, status int, typ string) {
		t.Helper()
		requireProblem(t, r.status, r.header, r.body, status, typ)
	}

	// Idempotency-Key mode: created, replayed, mismatched, refused.
	r := post("/orders", "alice", book, "Idempotency-Key", "e2e-1")
	first := requireCreated(t, r.status, r.header, r.body, false)
	done = append(done, keyedRequest{"alice", "e2e-1", book, r.body})
	r = post("/orders", "alice", book, "Idempotency-Key", "e2e-1")
	assert.Equal(t, first, requireCreated(t, r.status, r.header, r.body, true))
	want(post("/orders", "alice", pen, "Idempotency-Key", "e2e-1"), http.StatusUnprocessableEntity, idemhttp.ProblemKeyMismatch)
	want(post("/orders", "alice", book), http.StatusBadRequest, idemhttp.ProblemKeyMissing)
	want(post("/orders", "alice", `{"sku":"book","qty":0}`, "Idempotency-Key", "e2e-bad"), http.StatusBadRequest, problemInvalidBody)
	want(post("/orders", "alice", `{"sku":"book","qty":1,"x":1}`, "Idempotency-Key", "e2e-bad2"), http.StatusBadRequest, problemInvalidBody)
	want(post("/orders", "", book, "Idempotency-Key", "e2e-1"), http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)
	want(post("/orders", "alice", book, "Idempotency-Key", "e2e-2", delayHeader, "1m"), http.StatusBadRequest, problemInvalidHook)
	tooLarge := `{"sku":"` + strings.Repeat("x", maxOrderBody) + `","qty":1}`
	want(post("/orders", "alice", tooLarge, "Idempotency-Key", "e2e-big"), http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)

	// In flight: of concurrent copies, one runs and the others get 409.
	done = append(done, checkInFlight(t, c, url))

	// A 500 is not stored: the retry runs.
	want(post("/orders", "alice", pen, "Idempotency-Key", "e2e-fail", failHeader, "500"), http.StatusInternalServerError, problemDemoFailure)
	r = post("/orders", "alice", pen, "Idempotency-Key", "e2e-fail")
	requireCreated(t, r.status, r.header, r.body, false)
	done = append(done, keyedRequest{"alice", "e2e-fail", pen, r.body})

	// Window mode.
	r = post("/orders/quick", "alice", `{"sku":"lamp","qty":1}`)
	requireCreated(t, r.status, r.header, r.body, false)
	r = post("/orders/quick", "alice", `{"sku":"lamp","qty":1}`)
	want(r, http.StatusConflict, idemhttp.ProblemDuplicate)
	assert.NotEmpty(t, r.header.Get("Retry-After"))

	// Token mode.
	r = post("/tokens", "alice", "")
	require.Equal(t, http.StatusCreated, r.status)
	var tok idemhttp.IssuedToken
	require.NoError(t, json.Unmarshal(r.body, &tok))
	assert.Positive(t, tok.ExpiresIn)
	r = post("/orders/form", "alice", `{"sku":"mug","qty":1}`, "Idempotency-Token", tok.Token)
	form := requireCreated(t, r.status, r.header, r.body, false)
	r = post("/orders/form", "alice", `{"sku":"mug","qty":1}`, "Idempotency-Token", tok.Token)
	assert.Equal(t, form, requireCreated(t, r.status, r.header, r.body, true))
	want(post("/orders/form", "alice", `{"sku":"mug","qty":1}`, "Idempotency-Token", "forged-0123456789abcdef"), http.StatusBadRequest, idemhttp.ProblemTokenInvalid)
	want(post("/orders/form", "alice", `{"sku":"mug","qty":1}`), http.StatusBadRequest, idemhttp.ProblemTokenMissing)
	r = post("/tokens", "alice", "")
	require.Equal(t, http.StatusCreated, r.status)
	require.NoError(t, json.Unmarshal(r.body, &tok))
	want(post("/orders/form", "alice", tooLarge, "Idempotency-Token", tok.Token), http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge)
	want(doHTTP(t, c, http.MethodGet, url+"/orders", "", ""), http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)

	// book, the in-flight pen, the retried pen, lamp, mug.
	assert.Len(t, listOrdersHTTP(t, c, url, "alice"), 5)
	return done
}

// checkInFlight sends concurrent copies of a slow request: exactly one runs
// and creates the order; the others find it in flight (409 with
// Retry-After).
func checkInFlight(t *testing.T, c *http.Client, url string) keyedRequest {
	t.Helper()
	const copies = 4
	sub := submission{path: "/orders", body: []byte(pen), header: http.Header{
		userHeader: {"alice"}, idemhttp.DefaultKeyHeader: {"e2e-slow"}, delayHeader: {"2s"},
	}}
	outcomes := make([]outcome, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() { outcomes[i] = send(context.Background(), c, url, sub) })
	}
	wg.Wait()
	var fresh []outcome
	conflicts := 0
	for _, o := range outcomes {
		require.NoError(t, o.err)
		switch {
		case o.status == http.StatusCreated && !o.replayed:
			fresh = append(fresh, o)
		case o.status == http.StatusConflict:
			var p idemhttp.Problem
			require.NoError(t, json.Unmarshal(o.body, &p))
			assert.Equal(t, idemhttp.ProblemInProgress, p.Type)
			conflicts++
		case o.status == http.StatusCreated: // a copy that came after the first finished
		default:
			t.Errorf("a copy got %d: %s", o.status, o.body)
		}
	}
	require.Len(t, fresh, 1, "exactly one copy ran")
	assert.Positive(t, conflicts, "the others found it in flight")
	return keyedRequest{"alice", "e2e-slow", pen, fresh[0].body}
}

// stalledOrder is an order whose request was stalled after creating it
// when the process was killed.
type stalledOrder struct {
	user, key string
	order     Order
	answer    <-chan outcome // what the client got: an error once killed
}

// stallOrder sends a keyed request that stalls after creating its order
// (X-Demo-Stall), and returns the order once GET /orders shows it: the
// process is then inside the window between the order and the idempotency
// record, where a crash leaves the record in progress.
func stallOrder(t *testing.T, c *http.Client, url string) stalledOrder {
	t.Helper()
	sub := submission{path: "/orders", body: []byte(book), header: http.Header{
		userHeader: {"crasher"}, idemhttp.DefaultKeyHeader: {"crash-1"}, stallHeader: {"5s"},
	}}
	answer := make(chan outcome, 1)
	go func() { answer <- send(context.Background(), c, url, sub) }() // its answer is lost to the kill
	var orders []Order
	require.Eventually(t, func() bool {
		var err error
		orders, err = listUserOrders(context.Background(), c, url, "crasher")
		return err == nil && len(orders) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, orders, 1)
	return stalledOrder{"crasher", "crash-1", orders[0], answer}
}

// stormed is what a storm cut short by a SIGKILL left behind.
type stormed struct {
	runID string
	users int
	// completed are the Idempotency-Key submissions answered with a fresh
	// 201 before the kill.
	completed []keyedRequest
}

// stormThenKill starts a storm and SIGKILLs the process as soon as the
// first Idempotency-Key submission completes, with the other copies and
// users' submissions still in flight.
func stormThenKill(t *testing.T, p *demoProcess) stormed {
	t.Helper()
	s := stormed{runID: "e2ekill", users: 4}
	var mu sync.Mutex
	firstDone := make(chan struct{})
	var once sync.Once
	sc := stormConfig{
		baseURL: p.url, copies: 20, users: s.users, runID: s.runID,
		header: http.Header{delayHeader: {"200ms"}},
		observe: func(sub submission, o outcome) {
			if sub.mode != stormModes[0].name || o.status != http.StatusCreated || o.replayed {
				return
			}
			mu.Lock()
			s.completed = append(s.completed, keyedRequest{sub.user, sub.header.Get(idemhttp.DefaultKeyHeader), string(sub.body), o.body})
			mu.Unlock()
			once.Do(func() { close(firstDone) })
		},
	}
	stormDone := make(chan struct{})
	go func() {
		defer close(stormDone)
		_, _ = storm(context.Background(), sc) // fails once the process is gone
	}()
	select {
	case <-firstDone:
	case <-stormDone:
		t.Fatal("the storm ended before any submission completed")
	}
	p.kill()
	<-stormDone
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, s.completed)
	t.Logf("killed mid-storm: %d of %d Idempotency-Key submissions had completed", len(s.completed), s.users)
	return s
}

// checkReplayed checks that a completed key replays its first response
// byte for byte.
func checkReplayed(t *testing.T, c *http.Client, url string, k keyedRequest) {
	t.Helper()
	r := postHTTP(t, c, url, "/orders", k.user, k.body, "Idempotency-Key", k.key)
	requireCreated(t, r.status, r.header, r.body, true)
	assert.Equal(t, string(k.response), string(r.body), "key %s of %s", k.key, k.user)
}

// retryUntilSettled retries a keyed request while it is in progress (a
// record the killed process left until its lease expires) and returns the
// final answer.
func retryUntilSettled(t *testing.T, c *http.Client, url, user, key, body string) httpResponse {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := postHTTP(t, c, url, "/orders", user, body, "Idempotency-Key", key)
		if r.status != http.StatusConflict || time.Now().After(deadline) {
			return r
		}
	}
}

// checkStalledOrder retries the stalled key: once its lease expired, the
// handler runs again and the unique index hands back the order the killed
// process created. There is still exactly one.
func checkStalledOrder(t *testing.T, c *http.Client, url string, s stalledOrder) {
	t.Helper()
	r := retryUntilSettled(t, c, url, s.user, s.key, book)
	assert.Equal(t, s.order, requireCreated(t, r.status, r.header, r.body, false), "the retry ran and found the existing order")
	assert.Equal(t, []Order{s.order}, listOrdersHTTP(t, c, url, s.user))
	r = postHTTP(t, c, url, "/orders", s.user, book, "Idempotency-Key", s.key)
	assert.Equal(t, s.order, requireCreated(t, r.status, r.header, r.body, true))
}

// checkStormedOrders checks that the killed storm duplicated nothing: at
// most one order per submission in every mode, and exactly one for every
// Idempotency-Key submission once it is retried.
func checkStormedOrders(t *testing.T, c *http.Client, url string, s stormed) {
	t.Helper()
	for i := range s.users {
		user := "storm-" + s.runID + "-user" + itoa(uint64(i+1))
		bySKU := map[string]int{}
		for _, o := range listOrdersHTTP(t, c, url, user) {
			bySKU[o.SKU]++
		}
		for _, m := range stormModes {
			assert.LessOrEqual(t, bySKU["storm-"+s.runID+"-"+m.name], 1, "%s %s", user, m.name)
		}
		keySKU := "storm-" + s.runID + "-" + stormModes[0].name
		body, err := json.Marshal(orderRequest{SKU: keySKU, Qty: 1})
		require.NoError(t, err)
		r := retryUntilSettled(t, c, url, user, "order-"+user, string(body))
		assert.Equal(t, http.StatusCreated, r.status, string(r.body))
		n := 0
		for _, o := range listOrdersHTTP(t, c, url, user) {
			if o.SKU == keySKU {
				n++
			}
		}
		assert.Equal(t, 1, n, "%s: one order for its key", user)
	}
}

// checkStoreDown runs the binary over a store that does not answer (a Redis
// address nothing listens on): /healthz is 503, and so is every guarded
// route under -on-store-error closed, while open creates the order
// unguarded.
func checkStoreDown(t *testing.T, c *http.Client, bin string) {
	t.Helper()
	dead := freePort(t)
	p := launchDemo(t, bin, "-addr", "127.0.0.1:0", "-store", "redis://"+dead, "-log-level", "error")
	want := func(r httpResponse, status int, typ string) {
		t.Helper()
		requireProblem(t, r.status, r.header, r.body, status, typ)
		assert.NotEmpty(t, r.header.Get("Retry-After"))
	}
	want(doHTTP(t, c, http.MethodGet, p.url+"/healthz", "", ""), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	want(postHTTP(t, c, p.url, "/orders", "erin", book, "Idempotency-Key", "down-1"), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	want(postHTTP(t, c, p.url, "/orders/quick", "erin", book), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	want(postHTTP(t, c, p.url, "/tokens", "erin", ""), http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	assert.Empty(t, listOrdersHTTP(t, c, p.url, "erin"), "fail-closed ran nothing")
	p.kill()

	p = launchDemo(t, bin, "-addr", "127.0.0.1:0", "-store", "redis://"+dead, "-on-store-error", "open", "-log-level", "error")
	r := postHTTP(t, c, p.url, "/orders", "erin", book, "Idempotency-Key", "down-1")
	requireCreated(t, r.status, r.header, r.body, false)
	assert.Len(t, listOrdersHTTP(t, c, p.url, "erin"), 1)
}

// checkGracefulStop sends SIGTERM with a request in flight: the request
// completes and the process exits with status 0.
func checkGracefulStop(t *testing.T, c *http.Client, p *demoProcess) {
	t.Helper()
	slow := submission{path: "/orders", body: []byte(book), header: http.Header{
		userHeader: {"dave"}, idemhttp.DefaultKeyHeader: {"last"}, stallHeader: {"1s"},
	}}
	inFlight := make(chan outcome, 1)
	go func() { inFlight <- send(context.Background(), c, p.url, slow) }()
	// Its order exists while it stalls before answering: it is in flight.
	require.Eventually(t, func() bool {
		orders, err := listUserOrders(context.Background(), c, p.url, "dave")
		return err == nil && len(orders) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	o := <-inFlight
	require.NoError(t, o.err)
	assert.Equal(t, http.StatusCreated, o.status, string(o.body))
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("idemdemo did not exit after SIGTERM")
	}
	require.NoError(t, p.exitErr, "exit status; stderr:\n%s", p.stderr)
}
