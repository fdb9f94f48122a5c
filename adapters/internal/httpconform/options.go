package httpconform

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
)

// replayOf checks that again replays first: same status and body, marked
// with header replay.
func replayOf(t testing.TB, what string, first, again Answer, replay string) {
	t.Helper()
	if first.Status != http.StatusCreated || again.Status != first.Status || again.Body != first.Body || again.Header.Get(replay) != "true" {
		t.Fatalf("%s: first %v, again %v: want a replay marked %s", what, first, again, replay)
	}
}

// testQueryParams: WithQueryParams fingerprints only the named query
// parameters (none for an empty list), in Idempotency and in Window.
func testQueryParams(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o, Config{Mode: Idempotency, Query: []string{"express"}, QuerySet: true}) + "/orders/1"
	first := Send(t, "POST", u+"?express=1&utm=a", Body, As("alice", "k")...)
	replayOf(t, "another unselected parameter", first, Send(t, "POST", u+"?utm=b&express=1", Body, As("alice", "k")...), httpcore.ReplayedHeader)
	CheckProblem(t, Send(t, "POST", u+"?express=2", Body, As("alice", "k")...), http.StatusUnprocessableEntity, httpcore.ProblemKeyMismatch)

	none := key(t, serve, o, Config{Mode: Idempotency, QuerySet: true}) + "/orders/1"
	first = Send(t, "POST", none+"?express=1", Body, As("alice", "k")...)
	replayOf(t, "no parameter selected", first, Send(t, "POST", none+"?express=2", Body, As("alice", "k")...), httpcore.ReplayedHeader)

	w := serve(t, testkit.NewEngine(t), o, Config{Mode: Window, Query: []string{"express"}, QuerySet: true,
		Engine: []idemkit.Option{idemkit.WithWindow(time.Minute)}}) + "/orders/1"
	for _, q := range []string{"?express=1", "?express=2"} {
		if a := Send(t, "POST", w+q, Body, UserHeader, "alice"); a.Status != http.StatusCreated {
			t.Fatalf("Window %s: %v, want a fresh 201", q, a)
		}
	}
	CheckProblem(t, Send(t, "POST", w+"?express=1&utm=z", Body, UserHeader, "alice"), http.StatusConflict, httpcore.ProblemDuplicate)
	if n := o.Runs(); n != 4 {
		t.Errorf("handler ran %d times, want 4", n)
	}
}

// testFingerprinter: WithFingerprinter's fingerprinter decides which body
// is the same request.
func testFingerprinter(t *testing.T, serve Framework) {
	fp, err := keying.NewFingerprinter(keying.WithInclude("sku"))
	if err != nil {
		t.Fatal(err)
	}
	o := &Orders{}
	u := key(t, serve, o, Config{Mode: Idempotency, Fingerprinter: fp}) + "/orders/1"
	first := Send(t, "POST", u, Body, As("alice", "k")...)
	replayOf(t, "another quantity", first, Send(t, "POST", u, `{"sku":"book-42","qty":7}`, As("alice", "k")...), httpcore.ReplayedHeader)
	CheckProblem(t, Send(t, "POST", u, `{"sku":"book-43","qty":1}`, As("alice", "k")...), http.StatusUnprocessableEntity, httpcore.ProblemKeyMismatch)
	if n := o.Runs(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// testReplayHeader: WithReplayHeader's header marks replays and the
// problems of terminal records, and the default header does not.
func testReplayHeader(t *testing.T, serve Framework) {
	const replay = "X-Replay"
	o := &Orders{}
	u := key(t, serve, o, Config{Mode: Idempotency, ReplayHeader: replay}) + "/orders/1"
	first := Send(t, "POST", u, Body, As("alice", "k")...)
	again := Send(t, "POST", u, Body, As("alice", "k")...)
	replayOf(t, "replay", first, again, replay)
	if first.Header.Get(replay) != "" || again.Header.Get(httpcore.ReplayedHeader) != "" {
		t.Errorf("first marked %q; replay marked with the default header %q", first.Header.Get(replay), again.Header.Get(httpcore.ReplayedHeader))
	}
	big := &Orders{}
	big.big.Store(4096)
	b := key(t, serve, big, Config{Mode: Idempotency, ReplayHeader: replay, MaxStored: 64}) + "/orders/1"
	Send(t, "POST", b, Body, As("alice", "k")...)
	a := Send(t, "POST", b, Body, As("alice", "k")...)
	CheckProblem(t, a, http.StatusInternalServerError, httpcore.ProblemResponseNotStored)
	if a.Header.Get(replay) != "true" || a.Header.Get(httpcore.ReplayedHeader) != "" {
		t.Errorf("terminal record's problem: %v, want it marked %s only", a, replay)
	}
}

// testUnstoredRelease: with WithUnstored(ReleaseKey, ...), a response too
// large to store releases the key, so a retry runs the handler again; a
// token is spent without a result.
func testUnstoredRelease(t *testing.T, serve Framework) {
	o := &Orders{}
	o.big.Store(4096)
	u := key(t, serve, o, Config{Mode: Idempotency, MaxStored: 64, Release: true}) + "/orders/1"
	for i := range 2 {
		if a := Send(t, "POST", u, Body, As("alice", "big")...); a.Status != http.StatusCreated || len(a.Body) != 4096 || a.Header.Get(httpcore.ReplayedHeader) != "" {
			t.Fatalf("request %d: %d, %d bytes, replayed %q: want a fresh response", i, a.Status, len(a.Body), a.Header.Get(httpcore.ReplayedHeader))
		}
	}
	if n := o.Runs(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (the key released)", n)
	}
	e := testkit.NewEngine(t)
	tu := serve(t, e, o, Config{Mode: Token, MaxStored: 64, Release: true}) + "/orders/1"
	tok, err := e.IssueToken(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if a := Send(t, "POST", tu, Body, WithToken("alice", tok.Value)...); a.Status != http.StatusCreated {
		t.Fatalf("token's first use: %v", a)
	}
	CheckProblem(t, Send(t, "POST", tu, Body, WithToken("alice", tok.Value)...), http.StatusConflict, httpcore.ProblemTokenUsed)
	if n := o.Runs(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
}

// testProblemBase: WithProblemBase prefixes every problem type.
func testProblemBase(t *testing.T, serve Framework) {
	const base = "https://errors.example.com/idem/"
	typ := func(p string) string { return base + strings.TrimPrefix(p, httpcore.DefaultProblemBase) }
	o := &Orders{}
	u := key(t, serve, o, Config{Mode: Idempotency, ProblemBase: base}) + "/orders/1"
	CheckProblem(t, Send(t, "POST", u, Body, UserHeader, "alice"), http.StatusBadRequest, typ(httpcore.ProblemKeyMissing))
	CheckProblem(t, Send(t, "POST", u, Body, httpcore.DefaultKeyHeader, "k"), http.StatusUnauthorized, typ(httpcore.ProblemUnauthenticated))
	w := serve(t, testkit.NewEngine(t), o, Config{Mode: Window, ProblemBase: base,
		Engine: []idemkit.Option{idemkit.WithWindow(time.Minute)}}) + "/orders/1"
	Send(t, "POST", w, Body, UserHeader, "alice")
	CheckProblem(t, Send(t, "POST", w, Body, UserHeader, "alice"), http.StatusConflict, typ(httpcore.ProblemDuplicate))
}
