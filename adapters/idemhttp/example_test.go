package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// show prints what a client would see of a response.
func show(w *httptest.ResponseRecorder) {
	if w.Header().Get("Content-Type") == idemhttp.ProblemContentType {
		var p idemhttp.Problem
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		line := fmt.Sprint(w.Code, " ", p.Type)
		if ra := w.Header().Get("Retry-After"); ra != "" {
			line += " Retry-After: " + ra
		}
		fmt.Println(line)
		return
	}
	line := fmt.Sprint(w.Code, " ", w.Header().Get("Location"), " replayed: ", w.Header().Get(idemhttp.ReplayedHeader) == "true")
	if w.Body.Len() > 0 {
		line += " " + w.Body.String()
	}
	fmt.Println(line)
}

func post(h http.Handler, target, user string, header map[string]string, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	r.Header.Set("X-User", user)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A client retries a payment with the same Idempotency-Key: the payment is
// made once and the retry gets the stored response. Reusing the key for
// another payment is refused.
func ExampleIdempotency() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	// X-User is set by the authenticating gateway in front of this service.
	guard, err := idemhttp.Idempotency(engine, idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User")))
	if err != nil {
		panic(err)
	}
	payments := 0
	mux := http.NewServeMux()
	// Wrap the handler registered on the mux, so r.Pattern is set.
	mux.Handle("POST /payments", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payments++
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", payments))
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%d}`, payments)
	})))

	key := map[string]string{"Idempotency-Key": `"pay-7f3a"`}
	show(post(mux, "/payments", "alice", key, `{"amount":100}`))
	show(post(mux, "/payments", "alice", key, `{"amount":100}`)) // a retry
	show(post(mux, "/payments", "alice", key, `{"amount":250}`)) // the key reused
	show(post(mux, "/payments", "bob", key, `{"amount":100}`))   // another caller's key
	fmt.Println("payments:", payments)
	// Output:
	// 201 /payments/1 replayed: false {"id":1}
	// 201 /payments/1 replayed: true {"id":1}
	// 422 https://idemkit.dev/problems/key-mismatch
	// 201 /payments/2 replayed: false {"id":2}
	// payments: 2
}

// A form submitted twice within the window (a double click) creates one
// comment; the second submission gets 409 with the time left.
func ExampleWindow() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	guard, err := idemhttp.Window(engine,
		idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User")),
		idemhttp.WithEngineOptions(idemkit.WithWindow(10*time.Second)))
	if err != nil {
		panic(err)
	}
	comments := 0
	mux := http.NewServeMux()
	mux.Handle("POST /posts/{id}/comments", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		comments++
		w.Header().Set("Location", fmt.Sprintf("/posts/%s/comments/%d", r.PathValue("id"), comments))
		w.WriteHeader(http.StatusCreated)
	})))

	show(post(mux, "/posts/9/comments", "alice", nil, `{"text":"Nice!"}`))
	show(post(mux, "/posts/9/comments", "alice", nil, `{ "text": "Nice!" }`))
	fmt.Println("comments:", comments)
	// Output:
	// 201 /posts/9/comments/1 replayed: false
	// 409 https://idemkit.dev/problems/duplicate Retry-After: 10
	// comments: 1
}

// A checkout form carries a one-time token issued when the form was
// rendered: submitting it again replays the order, and a forged token is
// refused.
func ExampleToken() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	principal := idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User"))
	issuer, err := idemhttp.TokenIssuer(engine, principal)
	if err != nil {
		panic(err)
	}
	guard, err := idemhttp.Token(engine, principal)
	if err != nil {
		panic(err)
	}
	orders := 0
	mux := http.NewServeMux()
	mux.Handle("POST /checkout/tokens", issuer)
	mux.Handle("POST /checkout", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", orders))
		w.WriteHeader(http.StatusCreated)
	})))

	var tok idemhttp.IssuedToken
	_ = json.Unmarshal(post(mux, "/checkout/tokens", "alice", nil, "").Body.Bytes(), &tok)
	fmt.Println("expires in", tok.ExpiresIn, "seconds")

	form := map[string]string{"Idempotency-Token": tok.Token}
	show(post(mux, "/checkout", "alice", form, "cart=42"))
	show(post(mux, "/checkout", "alice", form, "cart=42"))
	show(post(mux, "/checkout", "alice", map[string]string{"Idempotency-Token": "forged-0123456789abcdef"}, "cart=42"))
	fmt.Println("orders:", orders)
	// Output:
	// expires in 600 seconds
	// 201 /orders/1 replayed: false
	// 201 /orders/1 replayed: true
	// 400 https://idemkit.dev/problems/token-invalid
	// orders: 1
}

// The client Transport adds an Idempotency-Key to every POST and keeps it
// across its retries, so a retried payment is never made twice.
func ExampleTransport() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	guard, _ := idemhttp.Idempotency(engine, idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User")))
	mux := http.NewServeMux()
	mux.Handle("POST /payments", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "paid")
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tr := &idemhttp.Transport{Base: srv.Client().Transport, MaxRetries: 4}
	if err := tr.Validate(); err != nil { // at start-up; RoundTrip would refuse too
		panic(err)
	}
	client := &http.Client{Transport: tr}
	r, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":100}`))
	r.Header.Set("X-User", "alice")
	resp, err := client.Do(r)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 201 paid
}

// Fail-open is chosen per route: while the store is down, the comments
// route runs its handler unguarded and the payments route refuses with
// 503, so no payment can be made twice.
func ExampleWithEngineOptions_failOpen() {
	engine, _ := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	principal := idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User"))
	comments, _ := idemhttp.Window(engine, principal,
		idemhttp.WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)))
	payments, _ := idemhttp.Idempotency(engine, principal) // fail-closed, the default
	created := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Path+"/1")
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /comments", comments(created))
	mux.Handle("POST /payments", payments(created))

	show(post(mux, "/comments", "alice", nil, `{"text":"hi"}`))
	show(post(mux, "/payments", "alice", map[string]string{"Idempotency-Key": "pay-1"}, `{"amount":100}`))
	// Output:
	// 201 /comments/1 replayed: false
	// 503 https://idemkit.dev/problems/unavailable Retry-After: 1
}

// With WithWait a retry that arrives while the first request still runs
// waits for its outcome and replays it, instead of getting 409.
func ExampleWithWait() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	guard, _ := idemhttp.Idempotency(engine,
		idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User")),
		idemhttp.WithWait(5*time.Millisecond))
	started, finish := make(chan struct{}), make(chan struct{})
	payments := 0
	mux := http.NewServeMux()
	mux.Handle("POST /payments", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payments++
		close(started)
		<-finish // a slow payment provider
		w.Header().Set("Location", "/payments/1")
		w.WriteHeader(http.StatusCreated)
	})))

	key := map[string]string{"Idempotency-Key": "pay-1"}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- post(mux, "/payments", "alice", key, `{"amount":100}`) }()
	<-started
	retry := make(chan *httptest.ResponseRecorder)
	go func() { retry <- post(mux, "/payments", "alice", key, `{"amount":100}`) }() // the client gave up and retried
	close(finish)
	show(<-first)
	show(<-retry)
	fmt.Println("payments:", payments)
	// Output:
	// 201 /payments/1 replayed: false
	// 201 /payments/1 replayed: true
	// payments: 1
}

// ProblemTypes lists every problem the middleware answers with, for a
// documentation page per type URI.
func ExampleProblemTypes() {
	for _, pt := range idemhttp.ProblemTypes()[:4] {
		fmt.Println(pt.Status, idemhttp.DefaultProblemBase+pt.Name, "-", pt.Title)
	}
	// Output:
	// 400 https://idemkit.dev/problems/key-missing - Idempotency key missing
	// 400 https://idemkit.dev/problems/key-invalid - Idempotency key invalid
	// 409 https://idemkit.dev/problems/in-progress - Request in progress
	// 422 https://idemkit.dev/problems/key-mismatch - Idempotency key reused with a different payload
}

// An HTML form carries its one-time token in a hidden field, as forms
// cannot set headers; the handler still reads the whole form.
func ExampleWithTokenField() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	principal := idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User"))
	tok, _ := engine.IssueToken(context.Background(), "alice") // rendered into the form
	guard, _ := idemhttp.Token(engine, principal, idemhttp.WithTokenField("idem_token"))
	mux := http.NewServeMux()
	mux.Handle("POST /checkout", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/orders/"+r.PostFormValue("cart"))
		w.WriteHeader(http.StatusCreated)
	})))

	form := url.Values{"cart": {"42"}, "idem_token": {tok.Value}}.Encode()
	header := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	show(post(mux, "/checkout", "alice", header, form))
	show(post(mux, "/checkout", "alice", header, form)) // submitted twice
	// Output:
	// 201 /orders/42 replayed: false
	// 201 /orders/42 replayed: true
}
