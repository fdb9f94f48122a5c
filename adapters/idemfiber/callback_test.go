package idemfiber_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/internal/testkit"
)

const fiberSecret = "whsec_fiber-callback-secret-0123456789"

func fiberSig(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// notifyApp serves POST /notify behind New(opts...) with a handler that
// counts runs, holds each run until release is closed (when set), and
// answers status (200 by default) naming the run.
type notifyApp struct {
	runs    atomic.Int64
	arrived atomic.Int64
	status  atomic.Int64
	release chan struct{}
	url     string
}

func newNotifyApp(t *testing.T, e *idemkit.Engine, release chan struct{}, opts ...idemfiber.Option) *notifyApp {
	t.Helper()
	a := &notifyApp{release: release}
	guard, err := idemfiber.New(e, opts...)
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	app.Post("/notify", func(c fiber.Ctx) error { a.arrived.Add(1); return c.Next() }, guard, func(c fiber.Ctx) error {
		n := a.runs.Add(1)
		if a.release != nil {
			<-a.release
		}
		status := int(a.status.Load())
		if status == 0 {
			status = http.StatusOK
		}
		return c.Status(status).SendString(fmt.Sprintf("run %d", n))
	})
	a.url = listen(t, app) + "/notify"
	return a
}

var signedByProvider = func() idemfiber.Option {
	p, err := idemfiber.SignedPrincipal(idemfiber.Signature{Sender: "provider", Secret: []byte(fiberSecret)})
	if err != nil {
		panic(err)
	}
	return idemfiber.WithPrincipal(p)
}()

func TestFiberKeyFromSources(t *testing.T) {
	byUser := idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))
	for _, c := range []struct {
		name    string
		src     idemfiber.KeySource
		query   string
		body    string
		headers []string
	}{
		{"JSON", idemfiber.KeyFromJSON("data.id"), "", `{"data":{"id":"e1"}}`, nil},
		{"header", idemfiber.KeyFromHeader("X-Delivery"), "", `{}`, []string{"X-Delivery", "d-1"}},
		{"query", idemfiber.KeyFromQuery("event"), "?event=q1", `{}`, nil},
		{"func", idemfiber.KeyFromFunc(func(c fiber.Ctx) (string, error) { return c.Get("X-Mine"), nil }), "", `{}`, []string{"X-Mine", "m-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newNotifyApp(t, testkit.NewEngine(t), nil, byUser, idemfiber.WithKeyFrom(c.src))
			h := append([]string{userHeader, "alice"}, c.headers...)
			first := send(t, http.MethodPost, a.url+c.query, c.body, h...)
			again := send(t, http.MethodPost, a.url+c.query, c.body, h...)
			if first.status != http.StatusOK || again.body != first.body || again.header.Get(idemfiber.ReplayedHeader) != "true" {
				t.Fatalf("first %v, again %v", first, again)
			}
			if n := a.runs.Load(); n != 1 {
				t.Fatalf("%d runs", n)
			}
		})
	}
}

func TestFiberKeyFromBadInput(t *testing.T) {
	byUser := idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader))
	a := newNotifyApp(t, testkit.NewEngine(t), nil, byUser, idemfiber.WithKeyFrom(idemfiber.KeyFromJSON("data.id")))
	for _, c := range []struct{ body, typ string }{
		{`{"data":{}}`, "key-missing"},
		{`{"data":{"id":{"x":1}}}`, "key-invalid"},
		{`{"data":{"id":null}}`, "key-invalid"},
		{`{"data":{"id":""}}`, "key-invalid"},
		{`{"data":{"id":"x"}`, "key-invalid"},
		{`{"data":{"id":"x","id":"y"}}`, "key-invalid"},
		{``, "key-invalid"},
	} {
		got := send(t, http.MethodPost, a.url, c.body, userHeader, "alice")
		if got.status != http.StatusBadRequest || !strings.Contains(got.body, c.typ) || !strings.Contains(got.body, "data.id") {
			t.Errorf("%s: %v, want 400 %s naming the path", c.body, got, c.typ)
		}
	}
	if n := a.runs.Load(); n != 0 {
		t.Fatalf("%d bad requests ran", n)
	}
}

func TestFiberCallbackStoresOnly2xxAndIgnoresTheRest(t *testing.T) {
	a := newNotifyApp(t, testkit.NewEngine(t), nil, signedByProvider, idemfiber.Callback(0), idemfiber.WithKeyFrom(idemfiber.KeyFromJSON("txn")))
	post := func(body string) answer {
		return send(t, http.MethodPost, a.url, body, "X-Signature", fiberSig(fiberSecret, body))
	}
	a.status.Store(http.StatusInternalServerError)
	if got := post(`{"txn":"T1","try":1}`); got.status != http.StatusInternalServerError {
		t.Fatalf("first: %v", got)
	}
	a.status.Store(http.StatusOK)
	first := post(`{"txn":"T1","try":2}`)
	again := post(`{"try":3,"txn":"T1"}`)
	if first.body != "run 2" || again.body != "run 2" || again.header.Get(idemfiber.ReplayedHeader) != "true" {
		t.Fatalf("after a 500 the retry runs, then is replayed: %v, %v", first, again)
	}
}

// TestFiberForgedCallbacks: forgeries before, during and after the
// genuine callback never run, block or read it.
func TestFiberForgedCallbacks(t *testing.T) {
	release := make(chan struct{})
	a := newNotifyApp(t, testkit.NewEngine(t), release, signedByProvider, idemfiber.Callback(0), idemfiber.WithKeyFrom(idemfiber.KeyFromJSON("txn")))
	genuine := `{"txn":"4200009999","amount":100}`
	forged := `{"txn":"4200009999","amount":1}`
	forgeries := [][]string{nil, {"X-Signature", "sha256=" + strings.Repeat("0", 64)},
		{"X-Signature", fiberSig("attacker-secret-0123456789abcdef", forged)}, {"X-Signature", fiberSig(fiberSecret, genuine)}}
	for _, h := range forgeries {
		if got := send(t, http.MethodPost, a.url, forged, h...); got.status != http.StatusUnauthorized {
			t.Fatalf("forged first: %v", got)
		}
	}
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			body, h, want := genuine, []string{"X-Signature", fiberSig(fiberSecret, genuine)}, http.StatusOK
			if i%2 == 1 {
				body, h, want = forged, forgeries[i%len(forgeries)], http.StatusUnauthorized
			}
			got, err := trySend(http.MethodPost, a.url, body, h...)
			switch {
			case err != nil:
				errs <- err
			case got.status != want || want == http.StatusOK && got.body != "run 1":
				errs <- fmt.Errorf("got %v, want %d", got, want)
			}
		})
	}
	testkit.WaitFor(t, "every request arrived and the genuine one runs", func() bool { return a.arrived.Load() >= 4+2*n && a.runs.Load() == 1 })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := send(t, http.MethodPost, a.url, genuine, "X-Signature", "sha256="+strings.Repeat("1", 64))
	if got.status != http.StatusUnauthorized || strings.Contains(got.body, "run") {
		t.Fatalf("forged after genuine: %v", got)
	}
	if r := a.runs.Load(); r != 1 {
		t.Fatalf("%d runs, want 1", r)
	}
}

func TestFiberSignedPrincipalRefusesBadSchemes(t *testing.T) {
	for _, s := range []idemfiber.Signature{
		{Secret: []byte(fiberSecret)},
		{Sender: "p", Secret: []byte("short")},
		{Sender: "p", Secret: []byte(fiberSecret), Tolerance: time.Minute},
	} {
		if _, err := idemfiber.SignedPrincipal(s); !errors.Is(err, idemkit.ErrInvalid) || strings.Contains(fmt.Sprint(err), fiberSecret) {
			t.Errorf("%+v: %v", s.Sender, err)
		}
	}
}

// A handled callback whose 2xx response is over the stored-size cap is
// answered 2xx on every retry, without the body that was not kept, and
// the handler does not run again.
func TestFiberCallbackKeepsA2xxTooLargeToStore(t *testing.T) {
	a := newNotifyApp(t, testkit.NewEngine(t), nil, signedByProvider, idemfiber.Callback(0),
		idemfiber.WithKeyFrom(idemfiber.KeyFromJSON("txn")), idemfiber.WithMaxStoredResponse(4))
	body := `{"txn":"T7"}`
	first := send(t, http.MethodPost, a.url, body, "X-Signature", fiberSig(fiberSecret, body))
	if first.status != http.StatusOK || first.body != "run 1" {
		t.Fatalf("first: %v", first)
	}
	for range 2 {
		again := send(t, http.MethodPost, a.url, body, "X-Signature", fiberSig(fiberSecret, body))
		if again.status != http.StatusOK || again.header.Get(idemfiber.ReplayedHeader) != "true" || again.body != "" {
			t.Fatalf("a retry of a handled callback: %v, want 200 replayed without the body", again)
		}
	}
	if n := a.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}
