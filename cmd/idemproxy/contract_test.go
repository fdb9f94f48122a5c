package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/redistest"
)

// wantProblem checks that res is the RFC 9457 problem the README documents
// for the demo: the status, application/problem+json, Cache-Control:
// no-store, the type, the status member, a urn:uuid instance, retryable
// exactly when Retry-After is sent, and the client's own idempotency key
// when it sent one in Idempotency mode.
func wantProblem(t *testing.T, res *http.Response, body []byte, status int, typ string, retryable bool, key string) {
	t.Helper()
	wantStatus(t, res, body, status)
	if ct := res.Header.Get("Content-Type"); ct != idemhttp.ProblemContentType {
		t.Errorf("%s: Content-Type %q", typ, ct)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", typ, cc)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s: body %s: %v", typ, body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" || !strings.HasPrefix(p.Instance, "urn:uuid:") {
		t.Errorf("problem %+v, want type %s status %d, a title and a urn:uuid instance", p, typ, status)
	}
	ra := res.Header.Get("Retry-After")
	if p.Retryable == nil || *p.Retryable != retryable || (ra != "") != retryable {
		t.Errorf("%s: retryable %v, Retry-After %q; want retryable %v exactly when Retry-After is sent", typ, p.Retryable, ra, retryable)
	}
	if ra != "" {
		if n, err := strconv.Atoi(ra); err != nil || n < 1 {
			t.Errorf("%s: Retry-After %q is not a positive number of seconds", typ, ra)
		}
	}
	if p.IdempotencyKey != key {
		t.Errorf("%s: idempotency_key %q, want %q", typ, p.IdempotencyKey, key)
	}
}

// TestDemoContractHoldsThroughTheProxy: the demo's HTTP contract as the
// README documents it (statuses, problem+json documents, replays, windows,
// tokens) holds for two proxies sharing one redis-server in front of the
// Python order backend, with the answers spread over both proxies.
func TestDemoContractHoldsThroughTheProxy(t *testing.T) {
	backend, executions := pythonBackend(t)
	redis := redistest.Start(t)
	storeURL := "redis://" + redis.Addr() + "/0"
	a, _ := startProxy(t, parseConfig(t, integrationConfig, backend, storeURL))
	b, _ := startProxy(t, parseConfig(t, integrationConfig, backend, storeURL))

	// Idempotency: first answer, canonical-JSON replay, mismatch.
	res, first := send(t, a.URL+"/orders", "POST", "alice", "order-1", `{"sku":"book","qty":1}`)
	wantStatus(t, res, first, http.StatusCreated)
	loc := res.Header.Get("Location")
	if loc == "" || res.Header.Get(idemhttp.ReplayedHeader) != "" || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("first answer headers %v", res.Header)
	}
	res, body := send(t, b.URL+"/orders", "POST", "alice", "order-1", `{"qty":1, "sku":"book"}`)
	wantStatus(t, res, body, http.StatusCreated)
	if string(body) != string(first) || res.Header.Get(idemhttp.ReplayedHeader) != "true" ||
		res.Header.Get("Location") != loc || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("replay %v %s, want the first answer %s with Location %s", res.Header, body, first, loc)
	}
	res, body = send(t, b.URL+"/orders", "POST", "alice", "order-1", `{"sku":"pen","qty":1}`)
	wantProblem(t, res, body, http.StatusUnprocessableEntity, idemhttp.ProblemKeyMismatch, false, "order-1")
	res, body = send(t, a.URL+"/orders", "POST", "alice", "", `{}`)
	wantProblem(t, res, body, http.StatusBadRequest, idemhttp.ProblemKeyMissing, false, "")
	res, body = send(t, a.URL+"/orders", "POST", "alice", `"unterminated`, `{}`)
	wantProblem(t, res, body, http.StatusBadRequest, idemhttp.ProblemKeyInvalid, false, "")

	// In flight on one proxy: 409 in-progress + Retry-After from the other.
	done := make(chan error, 1)
	go func() {
		_, _, err := trySend(a.URL+"/orders", "POST", "alice", "order-slow", `{}`, "X-Delay", "2")
		done <- err
	}()
	for executions()["order-slow"] == 0 {
		select {
		case err := <-done:
			t.Fatalf("slow request ended before it was seen running: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	res, body = send(t, b.URL+"/orders", "POST", "alice", "order-slow", `{}`)
	wantProblem(t, res, body, http.StatusConflict, idemhttp.ProblemInProgress, true, "order-slow")
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Window: a double click across the proxies.
	res, body = send(t, a.URL+"/orders/quick", "POST", "alice", "", `{"sku":"pen","qty":2}`)
	wantStatus(t, res, body, http.StatusCreated)
	res, body = send(t, b.URL+"/orders/quick", "POST", "alice", "", `{"sku":"pen","qty":2}`)
	wantProblem(t, res, body, http.StatusConflict, idemhttp.ProblemDuplicate, true, "")

	// Tokens: issued by the proxy, spent once, replayed, refused to others.
	res, body = send(t, a.URL+"/tokens", "POST", "alice", "", "")
	wantStatus(t, res, body, http.StatusCreated)
	var tok idemhttp.IssuedToken
	if err := json.Unmarshal(body, &tok); err != nil || tok.Token == "" || tok.ExpiresIn <= 0 {
		t.Fatalf("issued token %s: %v", body, err)
	}
	res, b1 := send(t, b.URL+"/orders/form", "POST", "alice", "", `{"sku":"mug","qty":1}`, "Idempotency-Token", tok.Token)
	wantStatus(t, res, b1, http.StatusCreated)
	res, b2 := send(t, a.URL+"/orders/form", "POST", "alice", "", `{"sku":"mug","qty":1}`, "Idempotency-Token", tok.Token)
	wantStatus(t, res, b2, http.StatusCreated)
	if string(b1) != string(b2) || res.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("token reuse: %s vs %s, replayed %q", b2, b1, res.Header.Get(idemhttp.ReplayedHeader))
	}
	res, body = send(t, b.URL+"/orders/form", "POST", "bob", "", `{"sku":"mug","qty":1}`, "Idempotency-Token", tok.Token)
	wantProblem(t, res, body, http.StatusBadRequest, idemhttp.ProblemTokenInvalid, false, "")
	res, body = send(t, b.URL+"/orders/form", "POST", "alice", "", `{}`)
	wantProblem(t, res, body, http.StatusBadRequest, idemhttp.ProblemTokenMissing, false, "")

	// No principal on a guarded route.
	res, body = send(t, a.URL+"/orders", "POST", "", "k", `{}`)
	wantProblem(t, res, body, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated, false, "")

	// What ran on the backend: order-1, order-slow, the window's first
	// submit and the token's first use; nothing else.
	got := executions()
	if got["order-1"] != 1 || got["order-slow"] != 1 || got["-"] != 2 || len(got) != 3 {
		t.Fatalf("backend executions %v", got)
	}
}
