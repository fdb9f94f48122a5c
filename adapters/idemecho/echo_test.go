package idemecho_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/idemkit/idemkit/adapters/idemecho"
	"github.com/idemkit/idemkit/adapters/internal/httpconform"
	"github.com/idemkit/idemkit/internal/testkit"
)

const body = httpconform.Body

var send, as = httpconform.Send, httpconform.As

var keyMode = httpconform.Config{Mode: httpconform.Idempotency}

// TestHTTPErrors: with WithHTTPErrors the middleware returns an
// *echo.HTTPError wrapping a *ProblemError, for the application's error
// handler, with the problem's headers already set; replays are written as
// always.
func TestHTTPErrors(t *testing.T) {
	o := &httpconform.Orders{}
	app := echo.New()
	var seen atomic.Pointer[idemecho.ProblemError]
	app.HTTPErrorHandler = func(c *echo.Context, err error) {
		var he *echo.HTTPError
		var pe *idemecho.ProblemError
		if !errors.As(err, &he) || !errors.As(err, &pe) {
			_ = c.String(http.StatusTeapot, "not an idemecho HTTPError: "+err.Error())
			return
		}
		seen.Store(pe)
		_ = c.String(he.Code, "app says: "+he.Message)
	}
	app.POST("/orders/:id", handle(o), guard(t, testkit.NewEngine(t), keyMode, idemecho.WithHTTPErrors()))
	u := listen(t, app) + "/orders/1"
	o.Hold()
	t.Cleanup(o.Unhold) // before the server closes

	a := send(t, "POST", u, body, httpconform.UserHeader, "alice")
	if a.Status != http.StatusBadRequest || !strings.HasPrefix(a.Body, "app says: ") || a.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("missing key: %v", a)
	}
	if p := seen.Load(); p == nil || p.Problem.Type != idemecho.ProblemKeyMissing || p.Problem.Status != 400 {
		t.Fatalf("the error handler saw %+v", p)
	}
	first := make(chan httpconform.Answer, 1)
	go func() {
		a, _ := httpconform.TrySend("POST", u, body, as("alice", "k-secret")...)
		first <- a
	}()
	testkit.WaitFor(t, "the first request to run", func() bool { return o.Runs() == 1 })
	a = send(t, "POST", u, body, as("alice", "k-secret")...)
	if a.Status != http.StatusConflict || a.Header.Get("Retry-After") == "" || strings.Contains(a.Body, "k-secret") {
		t.Fatalf("in progress: %v", a)
	}
	if p := seen.Load(); p.Problem.Type != idemecho.ProblemInProgress {
		t.Fatalf("the error handler saw %+v", p)
	}
	o.Unhold()
	f := <-first
	if r := send(t, "POST", u, body, as("alice", "k-secret")...); r.Status != http.StatusCreated || r.Body != f.Body || r.Header.Get(idemecho.ReplayedHeader) != "true" {
		t.Fatalf("replay %v of %v", r, f)
	}
}

// TestSkipper: a request the Skipper names goes to the handler untouched.
func TestSkipper(t *testing.T) {
	o := &httpconform.Orders{}
	app := echo.New()
	skip := idemecho.WithSkipper(func(c *echo.Context) bool { return c.Request().Header.Get("X-Internal") == "yes" })
	app.POST("/orders/:id", handle(o), guard(t, testkit.NewEngine(t), keyMode, skip))
	u := listen(t, app) + "/orders/1"
	for range 2 {
		if a := send(t, "POST", u, body, "X-Internal", "yes"); a.Status != http.StatusCreated {
			t.Fatalf("skipped request: %v", a)
		}
	}
	httpconform.CheckProblem(t, send(t, "POST", u, body, httpconform.UserHeader, "alice"), http.StatusBadRequest, idemecho.ProblemKeyMissing)
	if o.Runs() != 2 {
		t.Fatalf("handler ran %d times, want 2", o.Runs())
	}
}

// TestContextPrincipal: ContextPrincipal reads what an authentication
// middleware put in the context with c.Set; without it, 401.
func TestContextPrincipal(t *testing.T) {
	var runs atomic.Int64
	g, err := idemecho.Idempotency(testkit.NewEngine(t), idemecho.WithPrincipal(idemecho.ContextPrincipal("user")))
	if err != nil {
		t.Fatal(err)
	}
	app := echo.New()
	auth := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if u := c.Request().Header.Get("Authorization"); u != "" {
				c.Set("user", strings.TrimPrefix(u, "Bearer "))
			}
			return next(c)
		}
	}
	app.POST("/orders", func(c *echo.Context) error {
		return c.String(http.StatusCreated, "order "+strconv.FormatInt(runs.Add(1), 10))
	}, auth, g)
	u := listen(t, app) + "/orders"
	a := send(t, "POST", u, body, "Authorization", "Bearer alice", idemecho.DefaultKeyHeader, "k")
	b := send(t, "POST", u, body, "Authorization", "Bearer bob", idemecho.DefaultKeyHeader, "k")
	if a.Body != "order 1" || b.Body != "order 2" {
		t.Fatalf("alice got %v, bob %v", a, b)
	}
	httpconform.CheckProblem(t, send(t, "POST", u, body, idemecho.DefaultKeyHeader, "k"), http.StatusUnauthorized, idemecho.ProblemUnauthenticated)
}

// TestStreamIsNotStored: a response the handler flushes as it goes is
// not stored: the client gets it whole, and every repeat gets 500
// response-not-stored, marked replayed, without the handler running
// again.
func TestStreamIsNotStored(t *testing.T) {
	streamed(t, keyMode)
}

// TestStreamReleasesKey: with WithUnstored(ReleaseKey, ReleaseKey) a
// streamed response releases its key: a repeat streams afresh.
func TestStreamReleasesKey(t *testing.T) {
	streamed(t, httpconform.Config{Mode: httpconform.Idempotency, Release: true})
}

// streamed serves a handler that flushes its response as it goes behind
// cfg's guard and checks what repeats of its key get.
func streamed(t *testing.T, cfg httpconform.Config) {
	var runs atomic.Int64
	app := echo.New()
	app.POST("/events", func(c *echo.Context) error {
		runs.Add(1)
		c.Response().Header().Set("Content-Type", "text/plain")
		c.Response().WriteHeader(http.StatusOK)
		rc := http.NewResponseController(c.Response())
		for range 3 {
			if _, err := c.Response().Write([]byte("event\n")); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		}
		return nil
	}, guard(t, testkit.NewEngine(t), cfg))
	u := listen(t, app) + "/events"
	if a := send(t, "POST", u, body, as("alice", "k")...); a.Status != http.StatusOK || a.Body != "event\nevent\nevent\n" {
		t.Fatalf("first: %v", a)
	}
	for i := range 2 {
		a := send(t, "POST", u, body, as("alice", "k")...)
		if cfg.Release {
			if a.Status != http.StatusOK || a.Body != "event\nevent\nevent\n" || a.Header.Get(idemecho.ReplayedHeader) != "" {
				t.Fatalf("repeat %d with the key released: %v", i, a)
			}
			continue
		}
		httpconform.CheckProblem(t, a, http.StatusInternalServerError, idemecho.ProblemResponseNotStored)
		if a.Header.Get(idemecho.ReplayedHeader) != "true" || !strings.Contains(a.Body, "streamed") {
			t.Fatalf("repeat: %v", a)
		}
	}
	want := int64(1)
	if cfg.Release {
		want = 3
	}
	if n := runs.Load(); n != want {
		t.Fatalf("the streaming handler ran %d times, want %d", n, want)
	}
}

// TestTokenIssuer: the issuer's token works once with Token.
func TestTokenIssuer(t *testing.T) {
	e := testkit.NewEngine(t)
	issue, err := idemecho.TokenIssuer(e, idemecho.WithPrincipal(idemecho.TrustedHeaderPrincipal(httpconform.UserHeader)))
	if err != nil {
		t.Fatal(err)
	}
	o := &httpconform.Orders{}
	app := echo.New()
	app.POST("/tokens", issue)
	app.POST("/orders", handle(o), guard(t, e, httpconform.Config{Mode: httpconform.Token}))
	u := listen(t, app)
	httpconform.CheckProblem(t, send(t, "POST", u+"/tokens", ""), http.StatusUnauthorized, idemecho.ProblemUnauthenticated)
	a := send(t, "POST", u+"/tokens", "", httpconform.UserHeader, "alice")
	tok, _, _ := strings.Cut(strings.TrimPrefix(a.Body, `{"token":"`), `"`)
	if a.Status != http.StatusCreated || a.Header.Get("Cache-Control") != "no-store" || tok == "" || !strings.Contains(a.Body, `"expires_in":`) {
		t.Fatalf("issued: %v", a)
	}
	for range 2 {
		if b := send(t, "POST", u+"/orders", body, httpconform.WithToken("alice", tok)...); b.Status != http.StatusCreated {
			t.Fatalf("order with the issued token: %v", b)
		}
	}
	if o.Runs() != 1 {
		t.Fatalf("handler ran %d times for one token", o.Runs())
	}
}
