package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testkit"
)

// The browser tests drive the page of GET / in a real headless Chromium
// (Debian's chromium package, which ./scripts/test.sh installs) and count
// the orders each way of clicking creates.
//
// Environment:
//
//	IDEMDEMO_CHROMIUM      the browser binary (default: chromium on PATH);
//	                       when set, a missing binary fails the test
//	                       instead of skipping it
//	IDEMDEMO_SCREENSHOT    write a PNG of the page after the scenarios here
//	                       (./scripts/test.sh -run TestBrowser with
//	                       IDEMDEMO_SCREENSHOT=$PWD/docs/demo.png)
//	IDEMDEMO_TRACE         log every request the demo receives

// browserBudget bounds the whole browser test, browser start included.
const browserBudget = 85 * time.Second

// stepTimeout bounds each wait and each browser action of the test. A step
// takes well under a second on an idle machine; one that takes this long
// has missed its event, and the test fails naming it rather than using up
// browserBudget.
const stepTimeout = 20 * time.Second

// browserWindow is the dedup window of the browser demo's POST
// /orders/quick. window_five_clicks needs its five clicks inside one
// window, which the default of a few seconds does not promise on a loaded
// machine.
const browserWindow = time.Minute

// readyJS is true once app.js attached every handler of the page (the
// mark main sets last). A page restored from the back-forward cache keeps
// it, as it keeps its handlers.
const readyJS = `document.documentElement.dataset.ready === "true"`

// chromiumPath returns the browser binary, or skips the test when there is
// none and none was required.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("IDEMDEMO_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		require.NoError(t, err, "IDEMDEMO_CHROMIUM=%s is not an executable", p)
		return path
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("browser tests skipped: the chromium binary is not installed " +
			"(apt-get install chromium; ./scripts/test.sh installs it and then requires it)")
	}
	return path
}

// browserDemo is the demo served on a loopback port, with a count of the
// POST requests its handlers are running.
type browserDemo struct {
	url      string
	orders   *memoryOrders
	inflight atomic.Int64 // POST requests being handled
	posts    atomic.Int64 // POST requests received

	// held, when not nil, is a channel closed when the answers to POST
	// requests may go out (see holdAnswers).
	held atomic.Pointer[chan struct{}]
}

// holdAnswers makes the answer to every POST request that arrives from now
// wait, its handler's work done, until release is called (at the latest
// when t ends) or the browser abandons the request. A form post's answer
// replaces the page: held back, it cannot take the form away between the
// clicks of a multi-click test, however slowly a loaded machine lets the
// test click, and a reload lands on the page it was meant for. The server
// still receives, orders and runs every request as it comes.
func (d *browserDemo) holdAnswers(t *testing.T) (release func()) {
	gate := make(chan struct{})
	d.held.Store(&gate)
	var once sync.Once
	release = func() {
		once.Do(func() {
			d.held.Store(nil)
			close(gate)
		})
	}
	t.Cleanup(release)
	return release
}

// heldWriter delays the first byte of an answer until wait returns.
type heldWriter struct {
	http.ResponseWriter
	once sync.Once
	wait func()
}

func (h *heldWriter) WriteHeader(status int) {
	h.once.Do(h.wait)
	h.ResponseWriter.WriteHeader(status)
}

func (h *heldWriter) Write(b []byte) (int, error) {
	h.once.Do(h.wait)
	return h.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (h *heldWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

func startBrowserDemo(t *testing.T) *browserDemo {
	t.Helper()
	e := testkit.NewEngine(t)
	d := &browserDemo{orders: newMemoryOrders(maxMemoryOrders, maxMemoryOrdersPerUser)}
	h, err := newHandler(e, d.orders, browserWindow, discardLogger())
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if os.Getenv("IDEMDEMO_TRACE") != "" {
			t.Logf("%s %s %s", time.Now().Format("05.000"), r.Method, r.URL.Path)
		}
		if r.Method == http.MethodPost { // not the page's polling of GET /orders
			d.inflight.Add(1)
			defer d.inflight.Add(-1)
			if gate := d.held.Load(); gate != nil {
				done := r.Context().Done() // the browser abandoned the request
				w = &heldWriter{ResponseWriter: w, wait: func() {
					select {
					case <-*gate:
					case <-done:
					}
				}}
			}
			d.posts.Add(1) // last: a caller that saw it sees the request counted in flight and held
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d.url = srv.URL
	return d
}

// count returns how many orders of sku exist, for every user.
func (d *browserDemo) count(sku string) int {
	d.orders.mu.Lock()
	defer d.orders.mu.Unlock()
	n := 0
	for _, orders := range d.orders.byUser {
		for _, o := range orders {
			if o.SKU == sku {
				n++
			}
		}
	}
	return n
}

// The order each form places by default (ui/index.html).
const (
	skuUnprotected = "mug"
	skuToken       = "teapot"
	skuKey         = "kettle"
	skuWindow      = "grinder"
)

// settle waits until no request is being handled; a handler's work runs to
// its end even when the browser abandoned the request.
func (d *browserDemo) settle(ctx context.Context, t *testing.T) {
	t.Helper()
	waitUntil(ctx, t, "the server to finish every request", func() bool { return d.inflight.Load() == 0 })
}

// waitUntil polls cond until it holds, or fails the test when stepTimeout
// passes or ctx ends first.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s after %v: %v", what, time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-tick.C:
		}
	}
}

// newBrowser starts a headless Chromium with a fresh profile and returns
// the context of its first tab, bounded by browserBudget.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserBudget)
	t.Cleanup(cancel)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(bctx), "start chromium")
	return bctx
}

// tab is one browser tab on the demo.
type tab struct {
	t   *testing.T
	ctx context.Context
	d   *browserDemo
}

// step returns the context of one browser action, bounded by stepTimeout.
func (b tab) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, stepTimeout)
}

func (b tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// eval evaluates a JavaScript expression of type T.
func eval[T any](b tab, expr string) T {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// waitJS polls a JavaScript predicate until it is true. Errors while a
// navigation replaces the document count as false.
func (b tab) waitJS(what, expr string) {
	b.t.Helper()
	waitUntil(b.ctx, b.t, what, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		return err == nil && ok
	})
}

// reload reloads the page, as the user's reload button does, while a form
// submission is under way, and waits for the new document with its
// handlers. The reload cancels the submission's navigation, and
// chromedp.Reload may report that navigation's net::ERR_ABORTED as its
// own failure although the reload goes on; the mark open left on the old
// document tells the wait that the page has not come back yet.
func (b tab) reload() {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Reload())
	if err != nil && !strings.Contains(err.Error(), "net::ERR_ABORTED") {
		require.NoError(b.t, err)
	}
	b.waitJS("the reloaded page", `window.idemdemoOldDocument === undefined && `+readyJS)
}

// open loads a fresh render of the page (a new token, a new key state)
// with the slow server on or off, once its script attached its handlers,
// and marks the document as one a reload replaces.
func (b tab) open(slow bool) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.d.url + "/"))
	b.waitJS("the page and its script", `document.querySelector("#slow") !== null && `+readyJS)
	want := map[bool]string{true: "true", false: "false"}[slow]
	eval[bool](b, `(() => { const s = document.querySelector("#slow"); if (s.checked !== `+want+`) s.click(); return true })()`)
	b.waitJS("the slow toggle", `[...document.querySelectorAll('input[name="slow"]')].every(f => f.value === (`+want+` ? "1" : ""))`)
	eval[bool](b, `(window.idemdemoOldDocument = true)`) // for reload, which cannot mark it once a post is pending
}

// clicks clicks the selected button n times with real mouse events. Each
// click after the first waits until the server received the previous
// submission: clicks faster than the page can start a navigation only
// replace one another inside the browser (the HTML form's planned
// navigation), so a double click a person makes, with the first
// submission in flight, is one whose request has left.
// The clicks go to the button's place on the screen, found by script:
// the protocol's DOM node IDs do not survive a pending navigation or a
// page restored from the back-forward cache, and the protocol evaluates
// no script while a form post's navigation is pending. A form post's
// answer replaces the page, so a multi-click on a form holds the answers
// (holdAnswers) until the clicks are done: otherwise a click that comes
// after the answer lands on the result page, sends nothing, and the wait
// for its submission fails.
func (b tab) clicks(sel string, n int) {
	b.t.Helper()
	b.waitJS(sel+" with the page's handlers", `document.querySelector("`+sel+`") !== null && `+readyJS)
	at := eval[[]float64](b, `(() => {
		const el = document.querySelector("`+sel+`");
		el.scrollIntoView({block: "center"});
		const r = el.getBoundingClientRect();
		return [r.left + r.width / 2, r.top + r.height / 2];
	})()`)
	for i := range n {
		sent := b.d.posts.Load()
		b.do(chromedp.MouseClickXY(at[0], at[1]))
		waitUntil(b.ctx, b.t, fmt.Sprintf("the submission of click %d of %d on %s to reach the server", i+1, n, sel),
			func() bool { return b.d.posts.Load() > sent })
	}
}

// back goes back one history entry, like the browser's back button. It
// does not wait for a load event: a page restored from the back-forward
// cache has none.
func (b tab) back() {
	b.t.Helper()
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		h, err := cdp.Call(ctx, t, page.GetNavigationHistory, cdp.Empty{})
		if err != nil {
			return err
		}
		if h.CurrentIndex < 1 {
			return errors.New("no page to go back to")
		}
		_, err = cdp.Call(ctx, t, page.NavigateToHistoryEntry,
			page.NavigateToHistoryEntryParams{EntryID: h.Entries[h.CurrentIndex-1].ID})
		return err
	}))
}

// resultPage waits for the result page of a form post and returns its
// order number and whether the page says it was replayed.
func (b tab) resultPage() (id string, replayed bool) {
	b.t.Helper()
	b.waitJS("the result page", `document.body !== null && document.body.classList.contains("result") && `+readyJS)
	// app.js marks a replay before the page is ready.
	id = eval[string](b, `document.querySelector("#order-id").textContent`)
	replayed = eval[bool](b, `!document.querySelector("#replayed").hidden`)
	return id, replayed
}

// logLines returns the lines of a JavaScript variant's log.
func (b tab) logLines(sel string) []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll("`+sel+` li")].map(li => li.className + ": " + li.textContent)`)
}

// waitLog waits until the log has n lines of the given classes.
func (b tab) waitLog(sel string, n int, classes ...string) {
	b.t.Helper()
	q := make([]string, len(classes))
	for i, c := range classes {
		q[i] = sel + " li." + c
	}
	b.waitJS(fmt.Sprintf("%d final lines in %s", n, sel),
		fmt.Sprintf(`document.querySelectorAll(%q).length >= %d`, strings.Join(q, ", "), n))
}

// TestBrowser runs the failure modes of issue 19 in Chromium: five rapid
// clicks on each variant, the back button and a refresh on the token form,
// a refresh while the Idempotency-Key script is waiting, and two tabs
// submitting one token. Only the unprotected form may create more than one
// order, and it must: otherwise the test could not see a duplicate.
func TestBrowser(t *testing.T) {
	path := chromiumPath(t)
	d := startBrowserDemo(t)
	b := tab{t: t, ctx: newBrowser(t, path), d: d}

	t.Run("token_back_button_resubmit", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuToken)
		b.open(false)
		token := eval[string](b, `document.querySelector("#token").value`)
		b.clicks("#token-form button", 1)
		first, replayed := b.resultPage()
		require.False(t, replayed)
		b.back()
		b.waitJS("the form again", `document.querySelector("#token-form") !== null && `+readyJS)
		require.Equal(t, token, eval[string](b, `document.querySelector("#token").value`),
			"the back button shows the same render, with the same token")
		b.clicks("#token-form button", 1)
		second, replayed := b.resultPage()
		d.settle(b.ctx, t)
		made := d.count(skuToken) - before
		t.Logf("token form, submit, back, submit: %d order(s); pages: #%s then #%s (replayed %v)", made, first, second, replayed)
		require.Equal(t, 1, made)
		require.Equal(t, first, second)
		require.True(t, replayed)
	})

	t.Run("token_refresh_during_slow_submission", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuToken)
		b.open(true)
		token := eval[string](b, `document.querySelector("#token").value`)
		release := d.holdAnswers(t) // the reload comes while the order runs, however slow the test
		b.clicks("#token-form button", 1)
		b.reload()
		release()
		require.True(t, eval[bool](b, `document.querySelector("#token-form") !== null`), "the reload shows the form")
		require.NotEqual(t, token, eval[string](b, `document.querySelector("#token").value`),
			"a reload renders the page again, with a new token")
		d.settle(b.ctx, t)
		made := d.count(skuToken) - before
		t.Logf("token form, reload while the order runs: %d order(s)", made)
		require.Equal(t, 1, made, "the abandoned submission ran once and the reload did not post it again")
	})

	t.Run("key_refresh_during_slow_submission", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuKey)
		b.open(true)
		release := d.holdAnswers(t) // the reload comes while the order runs, however slow the test
		b.clicks("#key-form button", 1)
		b.reload()
		release()
		b.waitLog("#key-log", 1, "ok", "replay")
		d.settle(b.ctx, t)
		lines := b.logLines("#key-log")
		made := d.count(skuKey) - before
		t.Logf("Idempotency-Key, reload while the order runs: %d order(s); log after the reload:\n  %s", made, strings.Join(lines, "\n  "))
		require.Equal(t, 1, made)
		require.Contains(t, strings.Join(lines, "\n"), "resuming the submission")
	})

	t.Run("token_two_tabs", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		tctx, cancel := chromedp.NewContext(b.ctx) // a second tab of the same browser
		defer cancel()
		// Open the tab on its own context: the first action's context is the
		// tab's lifetime, and the steps' contexts end with their step.
		require.NoError(t, chromedp.Do(tctx), "open a second tab")
		b2 := tab{t: t, ctx: tctx, d: d}
		before := d.count(skuToken)
		b.open(true)
		b2.open(true)
		// A duplicated tab keeps the page it copied, token included.
		token := eval[string](b, `document.querySelector("#token").value`)
		eval[bool](b2, `(() => { document.querySelector("#token").value = "`+token+`"; return true })()`)
		var wg sync.WaitGroup
		ids := make([]string, 2)
		replays := make([]bool, 2)
		errs := make([]error, 2)
		for i, tb := range []tab{b, b2} {
			at := eval[[]float64](tb, `(() => {
				const r = document.querySelector("#token-form button").getBoundingClientRect();
				return [r.left + r.width / 2, r.top + r.height / 2];
			})()`)
			wg.Go(func() { errs[i] = chromedp.Do(tb.ctx, chromedp.MouseClickXY(at[0], at[1])) })
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		ids[0], replays[0] = b.resultPage()
		ids[1], replays[1] = b2.resultPage()
		d.settle(b.ctx, t)
		made := d.count(skuToken) - before
		t.Logf("token form in two tabs at once: %d order(s); pages #%s (replayed %v) and #%s (replayed %v)",
			made, ids[0], replays[0], ids[1], replays[1])
		require.Equal(t, 1, made)
		require.Equal(t, ids[0], ids[1])
		require.True(t, replays[0] != replays[1], "one tab ran the order, the other got its page replayed")
	})

	// The five-click runs come last, as a new visitor (new cookie, so an
	// empty order list): the page of the last two is the screenshot.
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))

	t.Run("unprotected_five_clicks", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuUnprotected)
		b.open(true)
		release := d.holdAnswers(t)
		b.clicks("#unprotected-form button", 5)
		release()
		b.resultPage()
		d.settle(b.ctx, t)
		made := d.count(skuUnprotected) - before
		t.Logf("unprotected form, 5 clicks: %d orders", made)
		require.Greater(t, made, 1, "five clicks on the unprotected form must show the duplicate")
	})

	t.Run("token_five_clicks", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuToken)
		b.open(true)
		release := d.holdAnswers(t)
		b.clicks("#token-form button", 5)
		release()
		id, replayed := b.resultPage()
		d.settle(b.ctx, t)
		made := d.count(skuToken) - before
		t.Logf("token form, 5 clicks: %d order(s); last page: order #%s, replayed %v", made, id, replayed)
		require.Equal(t, 1, made)
		require.True(t, replayed, "the page of the last click is the first click's page, replayed")
	})

	t.Run("key_five_clicks", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuKey)
		b.open(true)
		b.clicks("#key-form button", 5)
		b.waitLog("#key-log", 5, "ok", "replay")
		d.settle(b.ctx, t)
		made := d.count(skuKey) - before
		t.Logf("Idempotency-Key, 5 clicks: %d order(s); log:\n  %s", made, strings.Join(b.logLines("#key-log"), "\n  "))
		require.Equal(t, 1, made)
	})

	// On the page of key_five_clicks.
	t.Run("window_five_clicks", func(t *testing.T) {
		b := tab{t: t, ctx: b.ctx, d: d}
		before := d.count(skuWindow)
		b.clicks("#window-form button", 5)
		b.waitLog("#window-log", 5, "ok", "dup", "err")
		d.settle(b.ctx, t)
		made := d.count(skuWindow) - before
		t.Logf("dedup window, 5 clicks: %d order(s); log:\n  %s", made, strings.Join(b.logLines("#window-log"), "\n  "))
		require.Equal(t, 1, made)
	})

	if out := os.Getenv("IDEMDEMO_SCREENSHOT"); out != "" && !t.Failed() {
		b.waitJS("the order list", `document.querySelectorAll("#order-list li").length > 0`)
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, png, 0o644))
		t.Logf("screenshot: %s", out)
	}
}
