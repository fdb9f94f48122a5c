package main

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// The browser page's handlers, without a browser; browser_test.go drives
// the same page in Chromium.

var pageTokenRE = regexp.MustCompile(`name="idempotency_token" id="token" value="([^"]+)"`)

// uiGet sends GET path with the demo cookie user ("" for none).
func (a *testApp) uiGet(path, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if user != "" {
		r.AddCookie(&http.Cookie{Name: uiCookie, Value: user})
	}
	w := httptest.NewRecorder()
	a.handler.ServeHTTP(w, r)
	return w
}

// uiPost posts form to path with the demo cookie user, under ctx.
func (a *testApp) uiPost(ctx context.Context, path, user string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		r.AddCookie(&http.Cookie{Name: uiCookie, Value: user})
	}
	w := httptest.NewRecorder()
	a.handler.ServeHTTP(w, r)
	return w
}

// pageToken renders the page for user and returns its one-time token.
func (a *testApp) pageToken(user string) string {
	a.t.Helper()
	w := a.uiGet("/", user)
	require.Equal(a.t, http.StatusOK, w.Code, w.Body.String())
	m := pageTokenRE.FindStringSubmatch(w.Body.String())
	require.NotNil(a.t, m, "the page has no token field")
	return m[1]
}

func orderForm(sku string, token string) url.Values {
	v := url.Values{"sku": {sku}, "qty": {"1"}}
	if token != "" {
		v.Set(uiTokenField, token)
	}
	return v
}

func TestUIPageGivesADemoCookieAndAFreshTokenPerRender(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)

	w := a.uiGet("/", "")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, "default-src 'self'", w.Header().Get("Content-Security-Policy"))
	require.NotContains(t, w.Header().Get("Cache-Control"), "no-store", "the back button must show the same render")
	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, uiCookie, cookies[0].Name)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	require.True(t, validDemoUser(cookies[0].Value), cookies[0].Value)

	user := cookies[0].Value
	w = a.uiGet("/", user)
	require.Empty(t, w.Result().Cookies(), "a browser that has its cookie keeps it")

	seen := map[string]bool{}
	for range 5 {
		tok := a.pageToken(user)
		require.False(t, seen[tok], "a render reused a token")
		seen[tok] = true
	}
	require.Equal(t, http.StatusNotFound, a.uiGet("/nothing", user).Code)
}

func TestUIPageLoadsNothingFromElsewhere(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	attr := regexp.MustCompile(`(?:src|href)="([^"]*)"`)
	for _, page := range []string{a.uiGet("/", user).Body.String(), a.uiPost(t.Context(), "/ui/orders/unprotected", user, orderForm("mug", "")).Body.String()} {
		for _, m := range attr.FindAllStringSubmatch(page, -1) {
			require.True(t, strings.HasPrefix(m[1], "/"), "%s is not served by the demo", m[1])
			if m[1] != "/" {
				w := a.uiGet(m[1], user)
				require.Equal(t, http.StatusOK, w.Code, m[1])
			}
		}
	}
	require.Contains(t, a.uiGet("/ui/app.js", user).Header().Get("Content-Type"), "javascript")
	require.Contains(t, a.uiGet("/ui/style.css", user).Header().Get("Content-Type"), "text/css")
	for _, hidden := range []string{"/ui/", "/ui/index.html", "/ui/result.html"} {
		require.Equal(t, http.StatusNotFound, a.uiGet(hidden, user).Code, hidden)
	}
	files, err := fs.Glob(uiFiles, "ui/*")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"ui/app.js", "ui/index.html", "ui/result.html", "ui/style.css"}, files)
}

func TestDemoPrincipal(t *testing.T) {
	user := newDemoUser()
	cases := []struct {
		name   string
		header []string
		cookie string
		want   string
	}{
		{name: "header", header: []string{"alice"}, want: "alice"},
		{name: "cookie", cookie: user, want: user},
		{name: "header wins over cookie", header: []string{"alice"}, cookie: user, want: "alice"},
		{name: "nothing"},
		{name: "empty header, cookie", header: []string{""}, cookie: user},
		{name: "repeated header", header: []string{"a", "b"}},
		{name: "cookie not made by the page", cookie: "alice"},
		{name: "cookie with a bad digest", cookie: uiCookiePrefix + strings.Repeat("z", 32)},
		{name: "cookie too short", cookie: uiCookiePrefix + "abcd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, h := range tc.header {
				r.Header.Add(userHeader, h)
			}
			if tc.cookie != "" {
				r.AddCookie(&http.Cookie{Name: uiCookie, Value: tc.cookie})
			}
			got, err := demoPrincipal(r)
			if tc.want == "" {
				require.ErrorIs(t, err, idemhttp.ErrNoPrincipal)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestUIJSONRoutesAcceptTheDemoCookie(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"kettle","qty":1}`))
	r.AddCookie(&http.Cookie{Name: uiCookie, Value: user})
	r.Header.Set(idemhttp.DefaultKeyHeader, "k-1")
	w := httptest.NewRecorder()
	a.handler.ServeHTTP(w, r)
	o := created(t, w, false)
	require.Equal(t, user, o.User)
	require.Len(t, a.listOrdersOf(user), 1)
}

// listOrdersOf returns the orders of a demo-cookie user from GET /orders.
func (a *testApp) listOrdersOf(user string) []Order {
	a.t.Helper()
	orders, err := a.orders.List(a.t.Context(), user)
	require.NoError(a.t, err)
	return orders
}

func TestUITokenFormReplaysTheFirstPage(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	tok := a.pageToken(user)

	first := a.uiPost(t.Context(), "/ui/orders/token", user, orderForm("teapot", tok))
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	require.Equal(t, "text/html; charset=utf-8", first.Header().Get("Content-Type"))
	require.Empty(t, first.Header().Get(idemhttp.ReplayedHeader))
	require.Empty(t, first.Header().Get("Server-Timing"))
	require.Contains(t, first.Body.String(), `id="order-id">1<`)

	// The back button, a double click: the same token again (even with
	// another body, which token mode does not compare).
	for _, sku := range []string{"teapot", "other"} {
		again := a.uiPost(t.Context(), "/ui/orders/token", user, orderForm(sku, tok))
		require.Equal(t, http.StatusCreated, again.Code)
		require.Equal(t, "true", again.Header().Get(idemhttp.ReplayedHeader))
		require.Equal(t, replayTimingName, again.Header().Get("Server-Timing"))
		require.Equal(t, first.Body.String(), again.Body.String(), "the replay is the first page, byte for byte")
	}
	require.Len(t, a.listOrdersOf(user), 1)

	// A new render, a new token, a new order.
	next := a.uiPost(t.Context(), "/ui/orders/token", user, orderForm("teapot", a.pageToken(user)))
	require.Equal(t, http.StatusCreated, next.Code)
	require.Empty(t, next.Header().Get(idemhttp.ReplayedHeader))
	require.Len(t, a.listOrdersOf(user), 2)
}

// TestUITokenFormOneOrderUnderConcurrentRepeats races many posts of one
// token (a storm of clicks, several tabs): one creates the order, every
// other waits for it and gets its page.
func TestUITokenFormOneOrderUnderConcurrentRepeats(t *testing.T) {
	const n = 32
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	form := orderForm("teapot", a.pageToken(user))
	form.Set("slow", "1") // the first post is still running when the others come
	var wg sync.WaitGroup
	res := make([]*httptest.ResponseRecorder, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res[i] = a.uiPost(t.Context(), "/ui/orders/token", user, form)
		})
	}
	close(start)
	wg.Wait()
	fresh := 0
	for _, w := range res {
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		require.Equal(t, res[0].Body.String(), w.Body.String())
		if w.Header().Get(idemhttp.ReplayedHeader) == "" {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "exactly one post ran the order")
	require.Len(t, a.listOrdersOf(user), 1)
}

func TestUITokenFormRefusesMissingAndForeignTokens(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	alice, bob := newDemoUser(), newDemoUser()

	w := a.uiPost(t.Context(), "/ui/orders/token", alice, orderForm("teapot", ""))
	problem(t, w, http.StatusBadRequest, idemhttp.ProblemTokenMissing)
	w = a.uiPost(t.Context(), "/ui/orders/token", alice, orderForm("teapot", "forged"))
	problem(t, w, http.StatusBadRequest, idemhttp.ProblemTokenInvalid)
	w = a.uiPost(t.Context(), "/ui/orders/token", alice, orderForm("teapot", a.pageToken(bob)))
	problem(t, w, http.StatusBadRequest, idemhttp.ProblemTokenInvalid)
	require.Empty(t, a.listOrdersOf(alice))
	require.Empty(t, a.listOrdersOf(bob))
}

// TestUIUnprotectedFormCreatesEveryTime is the page's counter-example: the
// same post, many times at once, is that many orders.
func TestUIUnprotectedFormCreatesEveryTime(t *testing.T) {
	const n = 16
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			w := a.uiPost(t.Context(), "/ui/orders/unprotected", user, orderForm("mug", ""))
			require.Equal(t, http.StatusCreated, w.Code)
		})
	}
	wg.Wait()
	require.Len(t, a.listOrdersOf(user), n)
}

// TestUIFormWorkOutlivesTheBrowser: a browser that abandons a submission
// (a second click, a reload) closes its connection; the order it asked for
// is still made, as on most real servers, and made once.
func TestUIFormWorkOutlivesTheBrowser(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	form := orderForm("teapot", a.pageToken(user))
	form.Set("slow", "1")
	w := a.uiPost(gone, "/ui/orders/token", user, form)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Len(t, a.listOrdersOf(user), 1)
}

func TestUIFormRefusesBadInput(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	user := newDemoUser()
	for name, form := range map[string]url.Values{
		"no sku":       {"qty": {"1"}},
		"long sku":     {"sku": {strings.Repeat("x", 65)}, "qty": {"1"}},
		"NUL in sku":   {"sku": {"mu\x00g"}, "qty": {"1"}},
		"no qty":       {"sku": {"mug"}},
		"zero qty":     {"sku": {"mug"}, "qty": {"0"}},
		"word qty":     {"sku": {"mug"}, "qty": {"two"}},
		"huge qty":     {"sku": {"mug"}, "qty": {"1001"}},
		"token no sku": {"qty": {"1"}, uiTokenField: {a.pageToken(user)}},
	} {
		t.Run(name, func(t *testing.T) {
			path := "/ui/orders/unprotected"
			if form.Has(uiTokenField) {
				path = "/ui/orders/token"
			}
			w := a.uiPost(t.Context(), path, user, form)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
		})
	}
	require.Empty(t, a.listOrdersOf(user))

	huge := orderForm("mug", "")
	huge.Set("pad", strings.Repeat("x", uiMaxForm))
	w := a.uiPost(t.Context(), "/ui/orders/unprotected", user, huge)
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code, w.Body.String())
	require.Empty(t, a.listOrdersOf(user))
}

func TestUIFormNeedsAnIdentity(t *testing.T) {
	a := newTestApp(t, nil, defaultConfig().window)
	w := a.uiPost(t.Context(), "/ui/orders/unprotected", "", orderForm("mug", ""))
	require.Equal(t, http.StatusUnauthorized, w.Code)
	w = a.uiPost(t.Context(), "/ui/orders/token", "", orderForm("teapot", "whatever"))
	problem(t, w, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)
}

// TestReplayMarker checks the Server-Timing mark on replayed responses
// only, whichever of WriteHeader and Write comes first.
func TestReplayMarker(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"replayed, WriteHeader": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(idemhttp.ReplayedHeader, "true")
			w.WriteHeader(http.StatusCreated)
		},
		"replayed, Write": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(idemhttp.ReplayedHeader, "true")
			_, _ = w.Write([]byte("x"))
		},
		"fresh": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) },
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			replayTiming(h).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
			want := ""
			if strings.HasPrefix(name, "replayed") {
				want = replayTimingName
			}
			require.Equal(t, want, w.Header().Get("Server-Timing"))
			rc := http.NewResponseController(&replayMarker{ResponseWriter: w})
			require.False(t, errors.Is(rc.Flush(), http.ErrNotSupported), "Unwrap reaches the recorder's Flush")
		})
	}
}

func TestBannerNamesTheBrowserPage(t *testing.T) {
	var out syncBuffer
	printBanner(&out, "http://127.0.0.1:8080", defaultConfig(), "mem://")
	require.Contains(t, out.String(), "open http://127.0.0.1:8080/ and click duplicates yourself")
}
