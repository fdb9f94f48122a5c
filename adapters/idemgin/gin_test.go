package idemgin_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit/adapters/idemgin"
	"github.com/idemkit/idemkit/adapters/internal/httpconform"
	"github.com/idemkit/idemkit/internal/testkit"
)

const body = httpconform.Body

var send, as = httpconform.Send, httpconform.As

// TestStreamIsNotStored: a response written with c.Stream is flushed to
// the client as it goes, so it is not stored: the client gets every
// event, and every repeat gets 500 response-not-stored, marked replayed,
// without the handler running again.
func TestStreamIsNotStored(t *testing.T) {
	streamed(t, httpconform.Config{Mode: httpconform.Idempotency})
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
	r := gin.New()
	r.POST("/events", guard(t, testkit.NewEngine(t), cfg), func(c *gin.Context) {
		runs.Add(1)
		n := 0
		c.Header("Content-Type", "text/plain")
		c.Stream(func(w io.Writer) bool {
			n++
			_, _ = io.WriteString(w, "event\n")
			return n < 3
		})
	})
	u := listen(t, r) + "/events"
	if a := send(t, "POST", u, body, as("alice", "k")...); a.Status != http.StatusOK || a.Body != "event\nevent\nevent\n" {
		t.Fatalf("first: %v", a)
	}
	for i := range 2 {
		a := send(t, "POST", u, body, as("alice", "k")...)
		if cfg.Release {
			if a.Status != http.StatusOK || a.Body != "event\nevent\nevent\n" || a.Header.Get(idemgin.ReplayedHeader) != "" {
				t.Fatalf("repeat %d with the key released: %v", i, a)
			}
			continue
		}
		httpconform.CheckProblem(t, a, http.StatusInternalServerError, idemgin.ProblemResponseNotStored)
		if a.Header.Get(idemgin.ReplayedHeader) != "true" || !strings.Contains(a.Body, "streamed") {
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

// TestAborts: when the middleware answers itself, a problem or a replay,
// no later handler runs, and a handler after the guard sees its writes
// reach the client through gin's render (c.JSON) byte for byte.
func TestAborts(t *testing.T) {
	var runs, after atomic.Int64
	r := gin.New()
	r.POST("/orders", guard(t, testkit.NewEngine(t), httpconform.Config{Mode: httpconform.Idempotency}),
		func(c *gin.Context) {
			runs.Add(1)
			c.Next()
		},
		func(c *gin.Context) {
			after.Add(1)
			c.JSON(http.StatusCreated, gin.H{"id": after.Load(), "note": "<b>&</b>"})
		})
	u := listen(t, r) + "/orders"
	first := send(t, "POST", u, body, as("alice", "k")...)
	replay := send(t, "POST", u, body, as("alice", "k")...)
	httpconform.CheckProblem(t, send(t, "POST", u, body, httpconform.UserHeader, "alice"), http.StatusBadRequest, idemgin.ProblemKeyMissing)
	if first.Status != http.StatusCreated || replay.Body != first.Body || replay.Header.Get("Content-Type") != first.Header.Get("Content-Type") ||
		replay.Header.Get(idemgin.ReplayedHeader) != "true" {
		t.Fatalf("first %v, replay %v", first, replay)
	}
	if runs.Load() != 1 || after.Load() != 1 {
		t.Fatalf("after a replay and a problem, the handlers ran %d and %d times, want 1 and 1", runs.Load(), after.Load())
	}
}

// TestContextPrincipal: ContextPrincipal reads what an authentication
// middleware put in the context with c.Set; without it, 401.
func TestContextPrincipal(t *testing.T) {
	var runs atomic.Int64
	g, err := idemgin.Idempotency(testkit.NewEngine(t), idemgin.WithPrincipal(idemgin.ContextPrincipal("user")))
	if err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	auth := func(c *gin.Context) {
		if u := c.GetHeader("Authorization"); u != "" {
			c.Set("user", strings.TrimPrefix(u, "Bearer "))
		}
	}
	r.POST("/orders", auth, g, func(c *gin.Context) {
		c.String(http.StatusCreated, "order %d", runs.Add(1))
	})
	u := listen(t, r) + "/orders"
	a := send(t, "POST", u, body, "Authorization", "Bearer alice", idemgin.DefaultKeyHeader, "k")
	b := send(t, "POST", u, body, "Authorization", "Bearer bob", idemgin.DefaultKeyHeader, "k")
	if a.Body != "order 1" || b.Body != "order 2" {
		t.Fatalf("alice got %v, bob %v", a, b)
	}
	httpconform.CheckProblem(t, send(t, "POST", u, body, idemgin.DefaultKeyHeader, "k"), http.StatusUnauthorized, idemgin.ProblemUnauthenticated)
}

// TestPanicReleasesKey: a handler that panics (answered 500 by gin's
// Recovery) frees the key, so a retry runs the handler again.
func TestPanicReleasesKey(t *testing.T) {
	var runs atomic.Int64
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) { c.AbortWithStatus(500) }))
	r.POST("/orders", guard(t, testkit.NewEngine(t), httpconform.Config{Mode: httpconform.Idempotency}), func(c *gin.Context) {
		if runs.Add(1) == 1 {
			panic("database gone")
		}
		c.String(http.StatusCreated, "created")
	})
	u := listen(t, r) + "/orders"
	if a := send(t, "POST", u, body, as("alice", "k")...); a.Status != http.StatusInternalServerError {
		t.Fatalf("panicking first: %v", a)
	}
	if a := send(t, "POST", u, body, as("alice", "k")...); a.Status != http.StatusCreated || a.Header.Get(idemgin.ReplayedHeader) != "" {
		t.Fatalf("retry after a panic: %v", a)
	}
}

// TestTokenIssuer: the issuer's token works once with Token.
func TestTokenIssuer(t *testing.T) {
	e := testkit.NewEngine(t)
	byUser := idemgin.WithPrincipal(idemgin.TrustedHeaderPrincipal(httpconform.UserHeader))
	issue, err := idemgin.TokenIssuer(e, byUser)
	if err != nil {
		t.Fatal(err)
	}
	o := &httpconform.Orders{}
	r := gin.New()
	r.POST("/tokens", issue)
	r.POST("/orders", guard(t, e, httpconform.Config{Mode: httpconform.Token}), handle(o))
	u := listen(t, r)
	httpconform.CheckProblem(t, send(t, "POST", u+"/tokens", ""), http.StatusUnauthorized, idemgin.ProblemUnauthenticated)
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
