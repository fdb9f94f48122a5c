package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// The browser page: GET / serves an order form in four variants side by
// side, so a person can click the failure modes (double click, back
// button, refresh, two tabs) and see which variant stops the duplicate.
// Everything it needs (templates, script, style) is embedded in the
// binary; nothing is loaded from elsewhere.
//
//	GET  /                       the page; issues a fresh one-time token per render
//	GET  /ui/app.js, /ui/style.css
//	                             its script and style sheet
//	POST /ui/orders/unprotected  HTML form post with no protection at all
//	POST /ui/orders/token        HTML form post spending the page's one-time token
//
// The JavaScript variants use the JSON API: POST /orders with an
// Idempotency-Key, and POST /orders/quick (the dedup window).

//go:embed ui
var uiFiles embed.FS

// uiAssets are the files of ui/ served as they are; the templates are not.
var uiAssets = []string{"app.js", "style.css"}

// uiTemplates are the page and the result page of the form posts.
var uiTemplates = template.Must(template.ParseFS(uiFiles, "ui/*.html"))

const (
	// uiCookie names the demo principal of a browser (see demoPrincipal).
	uiCookie = "idemdemo_user"
	// uiCookiePrefix starts every demo principal a browser is given.
	uiCookiePrefix = "browser-"
	// uiSlowDelay is the "simulate slow server" delay: long enough for a
	// person to click again while the first submission is in flight.
	uiSlowDelay = 1500 * time.Millisecond
	// uiWorkTimeout bounds the work of a form post. The work is detached
	// from the browser's connection: a browser that abandons a submission
	// (a second click, a reload) does not stop the server's work, as with
	// most real servers, so the duplicates a second click causes are real.
	uiWorkTimeout = 30 * time.Second
	// uiMaxForm bounds a form post's body.
	uiMaxForm = 4 << 10
	// uiTokenField is the form field that carries the one-time token.
	uiTokenField = "idempotency_token"
	// replayTimingName is the Server-Timing metric that tells the result
	// page's script its response was replayed.
	replayTimingName = "idem-replayed"
)

// demoPrincipal identifies the caller: by the X-User-Id header, as every
// API client does, or else by the demo cookie that GET / gives a browser.
//
// DEMO ONLY. A browser cannot set X-User-Id on an HTML form post, so the
// page names its visitor with a random cookie. It authenticates nothing: a
// real service takes the principal from its session or its gateway.
func demoPrincipal(r *http.Request) (string, error) {
	if _, ok := r.Header[http.CanonicalHeaderKey(userHeader)]; ok {
		return headerPrincipal(r)
	}
	if c, err := r.Cookie(uiCookie); err == nil && validDemoUser(c.Value) {
		return c.Value, nil
	}
	return headerPrincipal(r) // the header's error: absent
}

// headerPrincipal reads X-User-Id.
var headerPrincipal = idemhttp.TrustedHeaderPrincipal(userHeader)

// validDemoUser reports whether v is a demo principal newDemoUser made.
func validDemoUser(v string) bool {
	hexPart, ok := strings.CutPrefix(v, uiCookiePrefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

// newDemoUser returns a fresh random demo principal.
func newDemoUser() string {
	return uiCookiePrefix + hex.EncodeToString(randomBytes(16))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// ui serves the browser page.
type ui struct {
	s      *server
	window time.Duration
	// token guards POST /ui/orders/token: a repeat of a token still in
	// flight waits for the first outcome and gets the same page back.
	token func(http.Handler) http.Handler
}

// registerUI adds the browser page and its routes to mux. window is the
// dedup window of POST /orders/quick, which the page explains.
func registerUI(mux *http.ServeMux, s *server, window time.Duration) error {
	token, err := idemhttp.Token(s.engine,
		idemhttp.WithPrincipal(s.principal), idemhttp.WithLogger(s.log),
		idemhttp.WithMaxBody(uiMaxForm), idemhttp.WithTokenField(uiTokenField), idemhttp.WithWait(0),
		// The result page is recorded, and sent even the first time from
		// the record when it was recorded in the order's transaction.
		idemhttp.WithReplayHeaders("Content-Security-Policy"))
	if err != nil {
		return fmt.Errorf("browser page: %w", err)
	}
	u := &ui{s: s, window: window, token: token}
	mux.HandleFunc("GET /{$}", u.page)
	for _, name := range uiAssets {
		mux.HandleFunc("GET /ui/"+name, func(w http.ResponseWriter, r *http.Request) {
			http.ServeFileFS(w, r, uiFiles, "ui/"+name)
		})
	}
	mux.Handle("POST /ui/orders/unprotected", detach(u.form(u.createOrder("unprotected", nil))))
	// The token middleware takes the token from the form field itself.
	mux.Handle("POST /ui/orders/token", detach(replayTiming(u.token(u.form(u.createOrder("token", formToken))))))
	return nil
}

// pageData fills ui/index.html.
type pageData struct {
	Token       string
	TokenTail   string
	SlowMillis  int64
	WindowLabel string
}

// page answers GET /: the four variants, with a one-time token issued for
// this render. It gives a browser without one its demo principal.
func (u *ui) page(w http.ResponseWriter, r *http.Request) {
	user, err := u.s.principal(r)
	if err != nil {
		user = newDemoUser()
		http.SetCookie(w, &http.Cookie{
			Name: uiCookie, Value: user, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
	}
	tok, err := u.s.engine.IssueToken(r.Context(), user)
	if err != nil {
		u.s.log.ErrorContext(r.Context(), "browser page: issue token", "error", err)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the idempotency store does not answer; reload in a moment", http.StatusServiceUnavailable)
		return
	}
	// Not no-store: the back button shows this very render again (with
	// its token), as browsers do with ordinary pages; a reload or a new
	// visit renders a new one.
	w.Header().Set("Cache-Control", "private, max-age=0")
	u.render(w, http.StatusOK, "index.html", pageData{
		Token:       tok.Value,
		TokenTail:   tail(tok.Value, 6),
		SlowMillis:  uiSlowDelay.Milliseconds(),
		WindowLabel: u.window.String(),
	})
}

// tail returns the last n bytes of s, to show which token a page holds
// without spelling it out.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// render executes the named template, answering 500 if it fails.
func (u *ui) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&b, name, data); err != nil {
		u.s.log.Error("browser page: render", "template", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// uiOrder is what a form post asks for, parsed by form.
type uiOrder struct {
	sku   string
	qty   int
	token string
	slow  bool
}

type uiOrderKey struct{}

// detach runs next on a context that the browser's connection does not
// cancel, bounded by uiWorkTimeout: a submission the browser abandons is
// still carried out, and its idempotency record completed.
func detach(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), uiWorkTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// form parses and checks an order form post and hands the order to next in
// the request context.
func (u *ui) form(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, uiMaxForm)
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("the form is over %d bytes", uiMaxForm), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "the form could not be read", http.StatusBadRequest)
			return
		}
		o := uiOrder{sku: r.PostFormValue("sku"), token: r.PostFormValue(uiTokenField), slow: r.PostFormValue("slow") == "1"}
		qty, err := strconv.Atoi(r.PostFormValue("qty"))
		switch {
		case o.sku == "" || len(o.sku) > 64 || strings.ContainsRune(o.sku, 0):
			http.Error(w, "sku must be a non-empty string of at most 64 bytes, without NUL", http.StatusBadRequest)
			return
		case err != nil || qty <= 0 || qty > 1000:
			http.Error(w, "qty must be an integer between 1 and 1000", http.StatusBadRequest)
			return
		}
		o.qty = qty
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), uiOrderKey{}, o)))
	})
}

// formToken is the order repository's unique key of a token form post,
// the last line of defence as for POST /orders/form.
func formToken(o uiOrder) string { return "uitoken:" + o.token }

// resultData fills ui/result.html.
type resultData struct {
	Variant string
	Order   Order
	At      string
}

// createOrder returns the handler behind a form post: wait when the slow
// server is simulated, create the order (unique per dedupKey when not nil)
// and answer with the HTML result page.
func (u *ui) createOrder(variant string, dedupKey func(uiOrder) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, _ := r.Context().Value(uiOrderKey{}).(uiOrder)
		user, err := u.s.principal(r)
		if err != nil {
			http.Error(w, "open / first: this browser has no demo identity", http.StatusUnauthorized)
			return
		}
		if o.slow && !sleep(r.Context(), uiSlowDelay) {
			http.Error(w, "the request timed out", http.StatusServiceUnavailable)
			return
		}
		key := ""
		if dedupKey != nil {
			key = dedupKey(o)
		}
		u.s.placeOrder(w, r, Order{SKU: o.sku, Qty: o.qty, User: user}, key, func(w http.ResponseWriter, order Order, err error) {
			switch {
			case errors.Is(err, errKeyReused):
				http.Error(w, "this token was already used for a different order", http.StatusUnprocessableEntity)
				return
			case errors.Is(err, errOrdersFull):
				http.Error(w, err.Error()+"; restart the demo", http.StatusInsufficientStorage)
				return
			case err != nil:
				u.s.log.ErrorContext(r.Context(), "browser page: create order", "error", err)
				http.Error(w, "the order could not be stored", http.StatusInternalServerError)
				return
			}
			u.render(w, http.StatusCreated, "result.html", resultData{
				Variant: variant, Order: order, At: time.Now().UTC().Format("15:04:05.000"),
			})
		})
	})
}

// replayTiming marks a replayed response with a Server-Timing metric, the
// only response header a page's script can read about its own document:
// the result page shows "replayed" when it finds it.
func replayTiming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&replayMarker{ResponseWriter: w}, r)
	})
}

// replayMarker adds the Server-Timing metric to a response that carries
// Idempotent-Replayed: true when its header is written.
type replayMarker struct {
	http.ResponseWriter
	wrote bool
}

func (m *replayMarker) WriteHeader(status int) {
	if !m.wrote {
		m.wrote = true
		if m.Header().Get(idemhttp.ReplayedHeader) == "true" {
			m.Header().Set("Server-Timing", replayTimingName)
		}
	}
	m.ResponseWriter.WriteHeader(status)
}

func (m *replayMarker) Write(b []byte) (int, error) {
	if !m.wrote {
		m.WriteHeader(http.StatusOK)
	}
	return m.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (m *replayMarker) Unwrap() http.ResponseWriter { return m.ResponseWriter }
