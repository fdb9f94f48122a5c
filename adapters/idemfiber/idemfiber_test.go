package idemfiber_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

const body = `{"sku":"book-42","qty":1}`

func TestReplay(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	first := send(t, "POST", u, body, as("alice", "k-1")...)
	if first.status != http.StatusCreated || first.header.Get(idemfiber.ReplayedHeader) != "" {
		t.Fatalf("first: %v", first)
	}
	// The same payload in another member order and spacing is the same request.
	again := send(t, "POST", u, `{ "qty":1, "sku":"book-42" }`, as("alice", `"k-1"`)...)
	if again.status != first.status || again.body != first.body {
		t.Fatalf("replay %v, want %v", again, first)
	}
	for _, h := range []string{"Location", "Content-Type"} {
		if again.header.Get(h) != first.header.Get(h) {
			t.Errorf("replayed %s = %q, want %q", h, again.header.Get(h), first.header.Get(h))
		}
	}
	if again.header.Get(idemfiber.ReplayedHeader) != "true" {
		t.Errorf("replay without %s: true", idemfiber.ReplayedHeader)
	}
	if again.header.Get("X-Not-Replayed") != "" {
		t.Error("a header off the allow-list was replayed")
	}
	if n := o.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestKeyErrors(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	cases := []struct {
		name    string
		headers []string
		status  int
		typ     string
	}{
		{"missing", []string{userHeader, "alice"}, 400, idemfiber.ProblemKeyMissing},
		{"empty", as("alice", `""`), 400, idemfiber.ProblemKeyInvalid},
		{"delimiter", as("alice", "a,b"), 400, idemfiber.ProblemKeyInvalid},
		{"unterminated", as("alice", `"abc`), 400, idemfiber.ProblemKeyInvalid},
		{"too long", as("alice", strings.Repeat("k", 256)), 400, idemfiber.ProblemKeyInvalid},
		{"repeated", append(as("alice", "k"), idemfiber.DefaultKeyHeader, "k2"), 400, idemfiber.ProblemKeyInvalid},
		{"no principal", []string{idemfiber.DefaultKeyHeader, "k"}, 401, idemfiber.ProblemUnauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, "POST", u, body, tc.headers...)
			checkProblem(t, a, tc.status, tc.typ)
		})
	}
	if n := o.runs.Load(); n != 0 {
		t.Errorf("handler ran %d times on rejected requests", n)
	}
}

// checkProblem checks a is a problem+json answer of status and type typ
// that quotes neither the key nor the principal.
func checkProblem(t *testing.T, a answer, status int, typ string) {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != idemfiber.ProblemContentType {
		t.Fatalf("got %v, want %d problem+json", a, status)
	}
	var p idemfiber.Problem
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" {
		t.Errorf("problem %+v, want type %s status %d", p, typ, status)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Error("problem without Cache-Control: no-store")
	}
	for _, secret := range []string{"alice", "k-secret"} {
		if strings.Contains(a.body, secret) {
			t.Errorf("problem quotes %q: %s", secret, a.body)
		}
	}
}

func TestMismatch(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o)
	send(t, "POST", u+"/orders/1", body, as("alice", "k-secret")...)
	checkProblem(t, send(t, "POST", u+"/orders/1", `{"sku":"book-42","qty":2}`, as("alice", "k-secret")...), 422, idemfiber.ProblemKeyMismatch)
	checkProblem(t, send(t, "POST", u+"/orders/2", body, as("alice", "k-secret")...), 422, idemfiber.ProblemKeyMismatch)
	checkProblem(t, send(t, "POST", u+"/orders/1?x=1", body, as("alice", "k-secret")...), 422, idemfiber.ProblemKeyMismatch)
	if n := o.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestPrincipalsDoNotShareKeys(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	a := send(t, "POST", u, body, as("alice", "k")...)
	b := send(t, "POST", u, body, as("bob", "k")...)
	if b.status != http.StatusCreated || b.body == a.body || b.header.Get(idemfiber.ReplayedHeader) != "" {
		t.Fatalf("bob got %v after alice's %v", b, a)
	}
}

func TestInProgress(t *testing.T) {
	o := &orders{release: make(chan struct{})}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	var once sync.Once
	release := func() { once.Do(func() { close(o.release) }) }
	t.Cleanup(release) // before the server's shutdown, which waits for the handler
	first := make(chan answer, 1)
	go func() {
		a, _ := trySend("POST", u, body, as("alice", "k-secret")...)
		first <- a
	}()
	testkit.WaitFor(t, "the first request to reach the handler", func() bool { return o.runs.Load() != 0 })
	a := send(t, "POST", u, body, as("alice", "k-secret")...)
	checkProblem(t, a, http.StatusConflict, idemfiber.ProblemInProgress)
	if a.header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	release()
	if f := <-first; f.status != http.StatusCreated {
		t.Fatalf("first: %v", f)
	}
}

func TestNotStoredReleasesKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(o *orders)
		want  int
	}{
		{"5xx", func(o *orders) { o.status.Store(http.StatusServiceUnavailable) }, http.StatusServiceUnavailable},
		{"handler error", func(o *orders) { o.fail.Store(true) }, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &orders{}
			u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
			tc.setup(o)
			if a := send(t, "POST", u, body, as("alice", "k")...); a.status != tc.want {
				t.Fatalf("first: %v, want %d", a, tc.want)
			}
			o.status.Store(0)
			o.fail.Store(false)
			a := send(t, "POST", u, body, as("alice", "k")...)
			if a.status != http.StatusCreated || a.header.Get(idemfiber.ReplayedHeader) != "" || o.runs.Load() != 2 {
				t.Fatalf("retry: %v after %d runs, want a fresh 201", a, o.runs.Load())
			}
		})
	}
}

func TestUnguardedMethodsPass(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	for range 2 {
		if a := send(t, "PUT", u, body); a.status != http.StatusCreated {
			t.Fatalf("PUT without key or principal: %v", a)
		}
	}
	if n := o.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestOptionalKey(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o, idemfiber.WithOptionalKey()) + "/orders/1"
	if a := send(t, "POST", u, body, userHeader, "alice"); a.status != http.StatusCreated {
		t.Fatalf("no key with WithOptionalKey: %v", a)
	}
}

// downStore fails every call as unavailable.
type downStore struct{ store.Store }

func (downStore) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, store.ErrUnavailable
}

func TestStoreDown(t *testing.T) {
	e := testkit.NewEngineOn(t, downStore{testkit.NewMem(t)})
	o := &orders{}
	a := send(t, "POST", serve(t, e, o)+"/orders/1", body, as("alice", "k-secret")...)
	checkProblem(t, a, http.StatusServiceUnavailable, idemfiber.ProblemUnavailable)
	if a.header.Get("Retry-After") != "1" || o.runs.Load() != 0 {
		t.Errorf("503 with Retry-After %q after %d runs", a.header.Get("Retry-After"), o.runs.Load())
	}
	open := serve(t, e, o, idemfiber.WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen))) + "/orders/1"
	if a := send(t, "POST", open, body, as("alice", "k")...); a.status != http.StatusCreated || o.runs.Load() != 1 {
		t.Fatalf("fail-open: %v", a)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	e := testkit.NewEngine(t)
	p := idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))
	cases := map[string][]idemfiber.Option{
		"no principal":        nil,
		"nil principal":       {idemfiber.WithPrincipal(nil)},
		"bad key header":      {p, idemfiber.WithKeyHeader("Idempotency Key")},
		"no methods":          {p, idemfiber.WithMethods()},
		"set-cookie replayed": {p, idemfiber.WithReplayHeaders("Set-Cookie")},
		"nil store policy":    {p, idemfiber.WithStorePolicy(nil)},
		"negative max stored": {p, idemfiber.WithMaxStoredResponse(-1)},
		"zero max stored":     {p, idemfiber.WithMaxStoredResponse(0)},
		"bad volatile path":   {p, idemfiber.WithVolatile("a[")},
		"bad engine option":   {p, idemfiber.WithEngineOptions(idemkit.WithWait(-1))},
		"scope per route":     {p, idemfiber.WithEngineOptions(idemkit.WithScope("x"))},
		"nil logger":          {p, idemfiber.WithLogger(nil)},
	}
	for name, opts := range cases {
		if _, err := idemfiber.New(e, opts...); !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := idemfiber.New(nil, p); !errors.Is(err, idemkit.ErrInvalid) {
		t.Errorf("nil engine: err = %v", err)
	}
}

// A cap of zero would store no response with a body and release every
// key: a silent "off switch". It is refused, with idemhttp's wording.
func TestNewRejectsNonPositiveMaxStoredResponse(t *testing.T) {
	e := testkit.NewEngine(t)
	p := idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))
	for _, n := range []int{0, -1} {
		_, err := idemfiber.New(e, p, idemfiber.WithMaxStoredResponse(n))
		if !errors.Is(err, idemkit.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("WithMaxStoredResponse(%d): must be positive", n)) {
			t.Errorf("WithMaxStoredResponse(%d): err = %v, want ErrInvalid saying it must be positive", n, err)
		}
	}
	if _, err := idemfiber.New(e, p, idemfiber.WithMaxStoredResponse(1)); err != nil {
		t.Errorf("WithMaxStoredResponse(1): %v", err)
	}
}

// A nil Option in a list (a conditional option left unset) is an error
// from New, not a panic.
func TestNewRejectsNilOption(t *testing.T) {
	e := testkit.NewEngine(t)
	p := idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("New panicked on a nil option: %v", r)
			}
		}()
		_, err = idemfiber.New(e, p, nil)
	}()
	if !errors.Is(err, idemkit.ErrInvalid) || !strings.Contains(err.Error(), "option 2 is nil") {
		t.Errorf("err = %v, want ErrInvalid naming option 2 (the principal is option 1)", err)
	}
}

// TestOneRunPerKey races many concurrent requests with one key on one
// instance: exactly one runs the handler; the others get 409 or, when it
// has finished, the replay.
func TestOneRunPerKey(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	const n = 64
	var wg sync.WaitGroup
	answers := make([]answer, n)
	for i := range n {
		wg.Go(func() { answers[i], _ = trySend("POST", u, body, as("alice", "race")...) })
	}
	wg.Wait()
	for _, a := range answers {
		if a.status != http.StatusCreated && a.status != http.StatusConflict {
			t.Errorf("answer %v", a)
		}
	}
	if runs := o.runs.Load(); runs != 1 {
		t.Fatalf("handler ran %d times for one key, want 1", runs)
	}
}

// TestProblemKeepsEarlierHeaders checks that an error answer keeps what
// middleware before the guard set, such as CORS headers a browser needs to
// read the error.
func TestProblemKeepsEarlierHeaders(t *testing.T) {
	guard, err := idemfiber.New(testkit.NewEngine(t), idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader)))
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	app.Use(func(c fiber.Ctx) error {
		c.Set("Access-Control-Allow-Origin", "*")
		return c.Next()
	})
	app.Post("/orders", guard, (&orders{}).handle)
	a := send(t, "POST", listen(t, app)+"/orders", body, userHeader, "alice")
	checkProblem(t, a, http.StatusBadRequest, idemfiber.ProblemKeyMissing)
	if a.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("the problem answer dropped an earlier middleware's header: %v", a.header)
	}
}

// TestTooLargeIsNeverRunAgain: a response over the middleware's stored
// size cap, or over the engine's result cap, is sent to its client but not
// kept; the key keeps a terminal record, so every repeat gets 500
// response-not-stored, marked replayed, and the handler runs once.
func TestTooLargeIsNeverRunAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    func(t testing.TB) *idemkit.Engine
		opts []idemfiber.Option
	}{
		{"middleware cap", func(t testing.TB) *idemkit.Engine { return testkit.NewEngine(t) },
			[]idemfiber.Option{idemfiber.WithMaxStoredResponse(4)}},
		{"engine cap", func(t testing.TB) *idemkit.Engine { return testkit.NewEngine(t, idemkit.WithMaxResultSize(8)) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &orders{}
			u := serve(t, tc.e(t), o, tc.opts...) + "/orders/1"
			if a := send(t, "POST", u, body, as("alice", "big")...); a.status != http.StatusCreated {
				t.Fatalf("first: %v", a)
			}
			for range 3 {
				a := send(t, "POST", u, body, as("alice", "big")...)
				if a.status != http.StatusInternalServerError || !strings.Contains(a.body, idemfiber.ProblemResponseNotStored) ||
					a.header.Get(idemfiber.ReplayedHeader) != "true" {
					t.Fatalf("repeat: %v, want 500 %s, replayed", a, idemfiber.ProblemResponseNotStored)
				}
			}
			if n := o.runs.Load(); n != 1 {
				t.Fatalf("the handler ran %d times, want 1", n)
			}
		})
	}
}

// TestRepeatedPrincipalHeaderIsRefused: a principal header sent twice
// (one from the gateway, one from the client, say) is no principal: 401,
// as idemhttp answers, never the first copy.
func TestRepeatedPrincipalHeaderIsRefused(t *testing.T) {
	o := &orders{}
	u := serve(t, testkit.NewEngine(t), o) + "/orders/1"
	a := send(t, "POST", u, body, userHeader, "alice", userHeader, "mallory", idemfiber.DefaultKeyHeader, "k")
	if a.status != http.StatusUnauthorized || o.runs.Load() != 0 {
		t.Fatalf("repeated principal header: %v after %d runs, want 401 and no run", a, o.runs.Load())
	}
	if a := send(t, "POST", u, body, userHeader, "", idemfiber.DefaultKeyHeader, "k"); a.status != http.StatusUnauthorized {
		t.Fatalf("empty principal header: %v, want 401", a)
	}
}

// TestKeysDoNotMeetOtherTransports: one engine behind Fiber and net/http,
// the same principal and Idempotency-Key on both: each transport runs its
// own handler once, and neither replays the other's response (issue 11
// item 6: the fiber key space is its own).
func TestKeysDoNotMeetOtherTransports(t *testing.T) {
	e := testkit.NewEngine(t)
	o := &orders{}
	u := serve(t, e, o) + "/orders/1"
	guard, err := idemhttp.Idempotency(e, idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal(userHeader)))
	if err != nil {
		t.Fatal(err)
	}
	var httpRuns atomic.Int64
	h := guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpRuns.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	if a := send(t, "POST", u, body, as("alice", "shared")...); a.status != http.StatusCreated {
		t.Fatalf("fiber: %v", a)
	}
	r := httptest.NewRequest("POST", "/orders/1", strings.NewReader(body))
	r.Header.Set(userHeader, "alice")
	r.Header.Set(idemfiber.DefaultKeyHeader, "shared")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated || w.Header().Get(idemfiber.ReplayedHeader) != "" || httpRuns.Load() != 1 {
		t.Fatalf("net/http after fiber with the same key: %d %v, %d runs; want its own first run", w.Code, w.Header(), httpRuns.Load())
	}
	if a := send(t, "POST", u, body, as("alice", "shared")...); a.header.Get(idemfiber.ReplayedHeader) != "true" || o.runs.Load() != 1 {
		t.Fatalf("fiber retry: %v after %d runs, want its own replay", a, o.runs.Load())
	}
}
