package httpconform

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// Run runs the contract against serve, each case as a subtest.
func Run(t *testing.T, serve Framework) {
	cases := []struct {
		name string
		test func(*testing.T, Framework)
	}{
		{"Replay", testReplay},
		{"KeyErrors", testKeyErrors},
		{"Mismatch", testMismatch},
		{"InProgress", testInProgress},
		{"Wait", testWait},
		{"OneRunPerKey", testOneRunPerKey},
		{"TooLarge", testTooLarge},
		{"PrincipalScoping", testPrincipalScoping},
		{"NotStoredReleasesKey", testNotStoredReleasesKey},
		{"UnguardedMethods", testUnguardedMethods},
		{"OptionalKey", testOptionalKey},
		{"BodyTooLarge", testBodyTooLarge},
		{"LogsHoldNoSecrets", testLogsHoldNoSecrets},
		{"StoreDown", testStoreDown},
		{"WindowDuplicate", testWindowDuplicate},
		{"WindowOneRun", testWindowOneRun},
		{"Token", testToken},
		{"TokenOneRun", testTokenOneRun},
		{"QueryParams", testQueryParams},
		{"Fingerprinter", testFingerprinter},
		{"ReplayHeader", testReplayHeader},
		{"UnstoredRelease", testUnstoredRelease},
		{"ProblemBase", testProblemBase},
		{"TwoInstancesOneRedis", testTwoInstances},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, serve) })
	}
}

func key(t testing.TB, serve Framework, o *Orders, cfg ...Config) string {
	t.Helper()
	c := Config{Mode: Idempotency}
	if len(cfg) > 0 {
		c = cfg[0]
	}
	return serve(t, testkit.NewEngine(t), o, c)
}

// testReplay: a retry gets the first response byte for byte (status,
// body, allow-listed headers) with the replay header, and the handler
// runs once.
func testReplay(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o) + "/orders/1"
	first := Send(t, "POST", u, Body, As("alice", "k-1")...)
	if first.Status != http.StatusCreated || first.Header.Get(httpcore.ReplayedHeader) != "" {
		t.Fatalf("first: %v", first)
	}
	// The same payload in another member order and spacing, and the key as
	// an sf-string, is the same request.
	for _, body := range []string{Body, `{ "qty":1, "sku":"book-42" }`} {
		again := Send(t, "POST", u, body, As("alice", `"k-1"`)...)
		if again.Status != first.Status || again.Body != first.Body {
			t.Fatalf("replay %v, want %v", again, first)
		}
		for _, h := range []string{"Location", "Content-Type"} {
			if again.Header.Get(h) != first.Header.Get(h) {
				t.Errorf("replayed %s = %q, want %q", h, again.Header.Get(h), first.Header.Get(h))
			}
		}
		if again.Header.Get(httpcore.ReplayedHeader) != "true" {
			t.Errorf("replay without %s: true", httpcore.ReplayedHeader)
		}
		if again.Header.Get("X-Not-Replayed") != "" {
			t.Error("a header off the allow-list was replayed")
		}
	}
	if n := o.Runs(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func testKeyErrors(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o) + "/orders/1"
	kh := httpcore.DefaultKeyHeader
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		typ     string
	}{
		{"missing", []string{UserHeader, "alice"}, 400, httpcore.ProblemKeyMissing},
		{"empty", As("alice", `""`), 400, httpcore.ProblemKeyInvalid},
		{"delimiter", As("alice", "a,b"), 400, httpcore.ProblemKeyInvalid},
		{"unterminated", As("alice", `"abc`), 400, httpcore.ProblemKeyInvalid},
		{"too long", As("alice", strings.Repeat("k", 256)), 400, httpcore.ProblemKeyInvalid},
		{"repeated", append(As("alice", "k-secret"), kh, "k2"), 400, httpcore.ProblemKeyInvalid},
		{"no principal", []string{kh, "k-secret"}, 401, httpcore.ProblemUnauthenticated},
		{"empty principal", []string{UserHeader, "", kh, "k-secret"}, 401, httpcore.ProblemUnauthenticated},
		{"repeated principal", []string{UserHeader, "alice", UserHeader, "mallory", kh, "k-secret"}, 401, httpcore.ProblemUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			CheckProblem(t, Send(t, "POST", u, Body, tc.headers...), tc.status, tc.typ, "k-secret", "mallory")
		})
	}
	if n := o.Runs(); n != 0 {
		t.Errorf("handler ran %d times on rejected requests", n)
	}
}

// testMismatch: the key with another body, path or query is 422.
func testMismatch(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o)
	Send(t, "POST", u+"/orders/1", Body, As("alice", "k-secret")...)
	for _, tc := range []struct{ name, url, body string }{
		{"body", u + "/orders/1", `{"sku":"book-43","qty":1}`},
		{"path", u + "/orders/2", Body},
		{"query", u + "/orders/1?express=1", Body},
	} {
		a := Send(t, "POST", tc.url, tc.body, As("alice", "k-secret")...)
		CheckProblem(t, a, http.StatusUnprocessableEntity, httpcore.ProblemKeyMismatch, "k-secret")
	}
	if n := o.Runs(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// hold serves o with its handler held until the returned release runs
// (also at the test's end, before the server closes) and starts the first
// request with key, returning its answer's channel once the handler runs.
func hold(t *testing.T, serve Framework, e *idemkit.Engine, o *Orders, cfg Config, user, key string) (string, <-chan Answer, func()) {
	o.Hold()
	u := serve(t, e, o, cfg) + "/orders/1"
	release := o.Unhold
	t.Cleanup(release)
	first := make(chan Answer, 1)
	go func() {
		a, _ := TrySend("POST", u, Body, As(user, key)...)
		first <- a
	}()
	testkit.WaitFor(t, "the first request to reach the handler", func() bool { return o.Runs() != 0 })
	return u, first, release
}

// testInProgress: the key while the first request runs is 409 with
// Retry-After, and the handler does not run again.
func testInProgress(t *testing.T, serve Framework) {
	o := &Orders{}
	u, first, release := hold(t, serve, testkit.NewEngine(t), o, Config{Mode: Idempotency}, "alice", "k-secret")
	a := Send(t, "POST", u, Body, As("alice", "k-secret")...)
	CheckProblem(t, a, http.StatusConflict, httpcore.ProblemInProgress, "k-secret")
	if a.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	release()
	if f := <-first; f.Status != http.StatusCreated {
		t.Fatalf("first: %v", f)
	}
	if n := o.Runs(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// testWait: with WithWait, or the engine's idemkit.WithWait, a request
// that repeats one in flight waits (it claims again after a pause, which
// a request answered 409 never does) and gets its response once stored.
func testWait(t *testing.T, serve Framework) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"WithWait", Config{Mode: Idempotency, Wait: time.Millisecond}},
		{"engine option", Config{Mode: Idempotency, Engine: []idemkit.Option{idemkit.WithWait(time.Millisecond)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Orders{}
			claims := &claimCounter{Store: testkit.NewMem(t)}
			u, first, release := hold(t, serve, testkit.NewEngineOn(t, claims), o, tc.cfg, "alice", "k")
			second := make(chan Answer, 1)
			go func() {
				a, _ := TrySend("POST", u, Body, As("alice", "k")...)
				second <- a
			}()
			testkit.WaitFor(t, "the second request to wait", func() bool { return claims.n.Load() >= 3 })
			release()
			f, s := <-first, <-second
			if f.Status != http.StatusCreated || s.Status != http.StatusCreated || s.Body != f.Body || s.Header.Get(httpcore.ReplayedHeader) != "true" {
				t.Fatalf("first %v, waiting second %v: want the second to replay the first", f, s)
			}
			if n := o.Runs(); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}

// claimCounter counts the claims (SetNX) made on its store.
type claimCounter struct {
	store.Store
	n atomic.Int64
}

func (c *claimCounter) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	c.n.Add(1)
	return c.Store.SetNX(ctx, key, value, ttl)
}

// testOneRunPerKey races many concurrent requests with one key: exactly
// one runs the handler; the others get 409 or the replay of its response.
func testOneRunPerKey(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o) + "/orders/1"
	fresh := race(t, 64, func(int) (Answer, error) { return TrySend("POST", u, Body, As("alice", "race")...) }, http.StatusConflict)
	if runs := o.Runs(); runs != 1 || fresh != 1 {
		t.Fatalf("handler ran %d times and %d answers were fresh for one key, want 1 and 1", runs, fresh)
	}
}

// testTooLarge: a response over the middleware's stored size cap, or the
// engine's result cap, is sent but not kept; every repeat gets 500
// response-not-stored, marked replayed, and the handler runs once.
func testTooLarge(t *testing.T, serve Framework) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"middleware cap", Config{Mode: Idempotency, MaxStored: 64}},
		{"engine cap", Config{Mode: Idempotency, Engine: []idemkit.Option{idemkit.WithMaxResultSize(64)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Orders{}
			o.big.Store(4096)
			u := key(t, serve, o, tc.cfg) + "/orders/1"
			if a := Send(t, "POST", u, Body, As("alice", "big")...); a.Status != http.StatusCreated || len(a.Body) != 4096 {
				t.Fatalf("first: %d, %d bytes", a.Status, len(a.Body))
			}
			for range 3 {
				a := Send(t, "POST", u, Body, As("alice", "big")...)
				CheckProblem(t, a, http.StatusInternalServerError, httpcore.ProblemResponseNotStored)
				if a.Header.Get(httpcore.ReplayedHeader) != "true" {
					t.Fatalf("repeat not marked replayed: %v", a)
				}
			}
			if n := o.Runs(); n != 1 {
				t.Fatalf("the handler ran %d times, want 1", n)
			}
		})
	}
}

// testPrincipalScoping: the same key from two principals is two requests;
// neither gets the other's response.
func testPrincipalScoping(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o) + "/orders/1"
	a := Send(t, "POST", u, Body, As("alice", "shared")...)
	b := Send(t, "POST", u, Body, As("bob", "shared")...)
	if a.Status != http.StatusCreated || b.Status != http.StatusCreated || b.Body == a.Body || b.Header.Get(httpcore.ReplayedHeader) != "" {
		t.Fatalf("bob got %v after alice's %v", b, a)
	}
	// And another payload under the same key is not a mismatch for bob.
	c := Send(t, "POST", u, `{"sku":"other"}`, As("carol", "shared")...)
	if c.Status != http.StatusCreated || o.Runs() != 3 {
		t.Fatalf("carol got %v after %d runs", c, o.Runs())
	}
}

// testNotStoredReleasesKey: a response the store policy refuses (5xx), or
// a failing handler, is sent once and releases the key.
func testNotStoredReleasesKey(t *testing.T, serve Framework) {
	for _, tc := range []struct {
		name  string
		setup func(o *Orders)
		want  int
	}{
		{"5xx", func(o *Orders) { o.status.Store(http.StatusServiceUnavailable) }, http.StatusServiceUnavailable},
		{"handler fails", func(o *Orders) { o.fail.Store(true) }, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Orders{}
			u := key(t, serve, o) + "/orders/1"
			tc.setup(o)
			if a := Send(t, "POST", u, Body, As("alice", "k")...); a.Status != tc.want {
				t.Fatalf("first: %v, want %d", a, tc.want)
			}
			o.status.Store(0)
			o.fail.Store(false)
			a := Send(t, "POST", u, Body, As("alice", "k")...)
			if a.Status != http.StatusCreated || a.Header.Get(httpcore.ReplayedHeader) != "" || o.Runs() != 2 {
				t.Fatalf("retry: %v after %d runs, want a fresh 201", a, o.Runs())
			}
		})
	}
}

func testUnguardedMethods(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o) + "/orders/1"
	for range 2 {
		if a := Send(t, "PUT", u, Body); a.Status != http.StatusCreated {
			t.Fatalf("PUT without key or principal: %v", a)
		}
	}
	if n := o.Runs(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func testOptionalKey(t *testing.T, serve Framework) {
	o := &Orders{}
	u := key(t, serve, o, Config{Mode: Idempotency, OptionalKey: true}) + "/orders/1"
	for range 2 {
		if a := Send(t, "POST", u, Body, UserHeader, "alice"); a.Status != http.StatusCreated || a.Header.Get(httpcore.ReplayedHeader) != "" {
			t.Fatalf("no key with WithOptionalKey: %v", a)
		}
	}
	if n := o.Runs(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// testBodyTooLarge: a request body over WithMaxBody is 413 in both modes
// that read it; one of exactly the cap runs the handler.
func testBodyTooLarge(t *testing.T, serve Framework) {
	for _, m := range []Mode{Idempotency, Window} {
		o := &Orders{}
		u := serve(t, testkit.NewEngine(t), o, Config{Mode: m, MaxBody: int64(len(Body))}) + "/orders/1"
		CheckProblem(t, Send(t, "POST", u, Body+" ", As("alice", "k")...), http.StatusRequestEntityTooLarge, httpcore.ProblemBodyTooLarge)
		if a := Send(t, "POST", u, Body, As("alice", "k")...); a.Status != http.StatusCreated || o.Runs() != 1 {
			t.Fatalf("mode %d, a body of the cap: %v after %d runs", m, a, o.Runs())
		}
	}
}

// testLogsHoldNoSecrets: the warnings of a response too large to keep,
// kept by the middleware's cap or refused by the engine's, name neither
// the key nor the principal.
func testLogsHoldNoSecrets(t *testing.T, serve Framework) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for _, cfg := range []Config{
		{Mode: Idempotency, MaxStored: 64, Logger: logger},
		{Mode: Idempotency, Logger: logger, Engine: []idemkit.Option{idemkit.WithMaxResultSize(64)}},
	} {
		o := &Orders{}
		o.big.Store(4096)
		u := serve(t, testkit.NewEngine(t), o, cfg) + "/orders/1"
		Send(t, "POST", u, Body, As("alice-secret", "k-secret")...)
	}
	if strings.Count(logs.String(), "\n") < 2 {
		t.Fatalf("want a warning per oversized response, logged %q", logs.String())
	}
	for _, s := range []string{"alice-secret", "k-secret"} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the log holds %q: %s", s, logs.String())
		}
	}
}

// downStore fails every claim and token use as unavailable.
type downStore struct{ store.Store }

func (downStore) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, store.ErrUnavailable
}

func (downStore) CompareAndSwap(context.Context, string, []byte, []byte, time.Duration) (bool, error) {
	return false, store.ErrUnavailable
}

// testStoreDown: a store failure is 503 with Retry-After (fail-closed),
// or runs the handler unguarded (fail-open).
func testStoreDown(t *testing.T, serve Framework) {
	for _, m := range []Mode{Idempotency, Window, Token} {
		e := testkit.NewEngineOn(t, downStore{testkit.NewMem(t)})
		o := &Orders{}
		headers := As("alice", "k-secret")
		if m == Token {
			tok, err := testkit.NewEngine(t).IssueToken(context.Background(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			headers = WithToken("alice", tok.Value)
		}
		a := Send(t, "POST", serve(t, e, o, Config{Mode: m})+"/orders/1", Body, headers...)
		CheckProblem(t, a, http.StatusServiceUnavailable, httpcore.ProblemUnavailable, "k-secret")
		if a.Header.Get("Retry-After") != "1" || o.Runs() != 0 {
			t.Errorf("mode %d: 503 with Retry-After %q after %d runs", m, a.Header.Get("Retry-After"), o.Runs())
		}
		if m == Token {
			continue // a token cannot be checked without the store
		}
		open := serve(t, e, o, Config{Mode: m, Engine: []idemkit.Option{idemkit.WithFailureMode(idemkit.FailOpen)}}) + "/orders/1"
		if a := Send(t, "POST", open, Body, headers...); a.Status != http.StatusCreated || o.Runs() != 1 {
			t.Fatalf("mode %d fail-open: %v after %d runs", m, a, o.Runs())
		}
	}
}

// testWindowDuplicate: a repeat inside the window is 409 duplicate with
// Retry-After; another body, or another principal, is not a repeat; with
// idemkit.ReleaseOnError, a response the store policy refuses ends the
// window at once.
func testWindowDuplicate(t *testing.T, serve Framework) {
	o := &Orders{}
	u := serve(t, testkit.NewEngine(t), o, Config{Mode: Window,
		Engine: []idemkit.Option{idemkit.WithWindow(time.Minute), idemkit.WithRelease(idemkit.ReleaseOnError)}}) + "/orders/1"
	if a := Send(t, "POST", u, Body, UserHeader, "alice"); a.Status != http.StatusCreated {
		t.Fatalf("first: %v", a)
	}
	a := Send(t, "POST", u, `{"qty":1,"sku":"book-42","timestamp":"later"}`, UserHeader, "alice")
	CheckProblem(t, a, http.StatusConflict, httpcore.ProblemDuplicate)
	if ra := a.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("duplicate with Retry-After %q", ra)
	}
	if a := Send(t, "POST", u, Body, UserHeader, "bob"); a.Status != http.StatusCreated {
		t.Fatalf("bob: %v", a)
	}
	if a := Send(t, "POST", u, `{"sku":"book-43"}`, UserHeader, "alice"); a.Status != http.StatusCreated {
		t.Fatalf("another body: %v", a)
	}
	CheckProblem(t, Send(t, "POST", u, Body), http.StatusUnauthorized, httpcore.ProblemUnauthenticated)
	o.status.Store(http.StatusInternalServerError)
	for range 2 {
		if a := Send(t, "POST", u, `{"sku":"book-44"}`, UserHeader, "alice"); a.Status != http.StatusInternalServerError {
			t.Fatalf("a failing request should end its window: %v", a)
		}
	}
	if n := o.Runs(); n != 5 {
		t.Errorf("handler ran %d times, want 5", n)
	}
}

// testWindowOneRun races many identical requests: one runs.
func testWindowOneRun(t *testing.T, serve Framework) {
	o := &Orders{}
	u := serve(t, testkit.NewEngine(t), o, Config{Mode: Window, Engine: []idemkit.Option{idemkit.WithWindow(time.Minute)}}) + "/orders/1"
	race(t, 64, func(int) (Answer, error) { return TrySend("POST", u, Body, UserHeader, "alice") }, http.StatusConflict)
	if n := o.Runs(); n != 1 {
		t.Fatalf("handler ran %d times in one window, want 1", n)
	}
}

// race sends n requests at once (send is given each one's index), checks
// each is 201 or other, and returns how many were fresh: 201 without the
// replay header.
func race(t *testing.T, n int, send func(i int) (Answer, error), other int) (fresh int) {
	var wg sync.WaitGroup
	answers := make([]Answer, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { answers[i], errs[i] = send(i) })
	}
	wg.Wait()
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			t.Errorf("request %d: %v", i, errs[i])
		case a.Status == http.StatusCreated && a.Header.Get(httpcore.ReplayedHeader) == "":
			fresh++
		case a.Status != http.StatusCreated && a.Status != other:
			t.Errorf("request %d: %v", i, a)
		}
	}
	return fresh
}

// testToken: a token runs the handler once; its reuse replays; a missing,
// malformed, unknown or other principal's token is refused; a token whose
// first use was not stored gets 409 token-used.
func testToken(t *testing.T, serve Framework) {
	e := testkit.NewEngine(t)
	o := &Orders{}
	u := serve(t, e, o, Config{Mode: Token}) + "/orders/1"
	issue := func() string {
		tok, err := e.IssueToken(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		return tok.Value
	}
	tok := issue()
	first := Send(t, "POST", u, Body, WithToken("alice", tok)...)
	again := Send(t, "POST", u, `{"other":"payload"}`, WithToken("alice", tok)...)
	if first.Status != http.StatusCreated || again.Body != first.Body || again.Header.Get(httpcore.ReplayedHeader) != "true" {
		t.Fatalf("first %v, reuse %v", first, again)
	}
	CheckProblem(t, Send(t, "POST", u, Body, WithToken("bob", tok)...), http.StatusBadRequest, httpcore.ProblemTokenInvalid, tok)
	CheckProblem(t, Send(t, "POST", u, Body, WithToken("alice", "forged")...), http.StatusBadRequest, httpcore.ProblemTokenInvalid)
	CheckProblem(t, Send(t, "POST", u, Body, WithToken("alice", `"unterminated`)...), http.StatusBadRequest, httpcore.ProblemTokenInvalid)
	CheckProblem(t, Send(t, "POST", u, Body, UserHeader, "alice"), http.StatusBadRequest, httpcore.ProblemTokenMissing)
	if n := o.Runs(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	o.status.Store(http.StatusInternalServerError)
	spent := issue()
	if a := Send(t, "POST", u, Body, WithToken("alice", spent)...); a.Status != http.StatusInternalServerError {
		t.Fatalf("failing first use: %v", a)
	}
	CheckProblem(t, Send(t, "POST", u, Body, WithToken("alice", spent)...), http.StatusConflict, httpcore.ProblemTokenUsed, spent)
	if n := o.Runs(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// testTokenOneRun races many uses of one token: one runs.
func testTokenOneRun(t *testing.T, serve Framework) {
	e := testkit.NewEngine(t)
	o := &Orders{}
	u := serve(t, e, o, Config{Mode: Token}) + "/orders/1"
	tok, err := e.IssueToken(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	race(t, 64, func(int) (Answer, error) { return TrySend("POST", u, Body, WithToken("alice", tok.Value)...) }, http.StatusConflict)
	if n := o.Runs(); n != 1 {
		t.Fatalf("handler ran %d times for one token, want 1", n)
	}
}
