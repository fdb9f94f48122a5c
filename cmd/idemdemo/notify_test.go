package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// The pay-later callbacks on the real binary, on every store: orders
// placed unpaid, then each order's genuine callback sent notifyCopies
// times, concurrently and shuffled with the other orders' (every copy
// with its own sent_at, as a provider's retries have), forgeries
// interleaved (unsigned, signed with another secret, the genuine
// signature over another body) and sent first too. A second batch is
// SIGKILLed in the middle of its storm; the demo is restarted on the same
// store and every callback of both batches sent notifyCopies times again.
// Per order: exactly one transition from unpaid to paid, one notification
// row, every genuine callback answered 200 with one body, every forgery
// 401. Then a second transaction for a paid order: 200, a second
// notification row, no second transition.
const (
	notifyCopies = 50
	notifyOrders = 3 // per batch
)

func TestPayNotifyCallbacks(t *testing.T) {
	bin := buildDemo(t)
	secretFile := filepath.Join(t.TempDir(), "notify-secret")
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	secret = []byte(hex.EncodeToString(secret))
	require.NoError(t, os.WriteFile(secretFile, append(secret, '\n'), 0o600))
	var table []string
	run := func(name, storeURL string, db *sql.DB) {
		t.Run(name, func(t *testing.T) {
			nr := &notifyRun{t: t, bin: bin, secret: secret, store: name, db: db,
				args: []string{"-addr", "127.0.0.1:0", "-store", storeURL, "-lease", "2s", "-budget", "5s", "-log-level", "warn", "-crash-hooks", "-notify-secret-file", secretFile}}
			table = append(table, nr.run())
		})
	}
	run("bbolt", "bolt://"+filepath.Join(t.TempDir(), "demo.db"), nil)
	srv := redistest.Start(t)
	run("redis", "redis://"+srv.Addr(), nil)
	pgURL, db := pgTestDatabase(t)
	run("postgres", pgURL, db)
	run("mariadb", mariaTestDatabase(t), nil)
	t.Logf("\n| Store | Orders | Genuine callbacks | 200 | Cut by the kill | Forged | 401 | Forged, cut | Transitions | Notification rows |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n%s", strings.Join(table, "\n"))
}

// notifyRun drives one store's orders.
type notifyRun struct {
	t      *testing.T
	bin    string
	args   []string
	secret []byte
	store  string
	db     *sql.DB // the PostgreSQL database, to count rows; nil elsewhere
	c      *http.Client

	genuine, ok, forged, refused, cut, forgedCut atomic.Int64
	// answers holds each transaction's 200 bodies.
	mu      sync.Mutex
	answers map[string]map[string]int
	fresh   map[string]int // answers not marked replayed
}

// callback is one callback to send.
type callback struct {
	tx     string
	body   string
	sig    string // the X-Signature value; "" for none
	forged bool
	pause  bool // with X-Demo-Pause-After: notify
}

func (nr *notifyRun) sign(secret []byte, body string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// noticeBody is a callback body for order o of transaction tx.
func noticeBody(tx string, o UnpaidOrder, sentAt int) string {
	return fmt.Sprintf(`{"transaction_id":%q,"order":%d,"status":"paid","amount_cents":%d,"sent_at":%d}`, tx, o.ID, o.AmountCents, sentAt)
}

// callbacks returns, for each order, notifyCopies genuine callbacks and
// three forgeries, shuffled together.
func (nr *notifyRun) callbacks(orders []UnpaidOrder, txs []string) []callback {
	var out []callback
	other := []byte("not-the-providers-secret-0123456789")
	for i, o := range orders {
		for n := range notifyCopies {
			b := noticeBody(txs[i], o, n)
			out = append(out, callback{tx: txs[i], body: b, sig: nr.sign(nr.secret, b)})
		}
		genuine := noticeBody(txs[i], o, 1000)
		altered := strings.Replace(genuine, fmt.Sprintf(`"amount_cents":%d`, o.AmountCents), `"amount_cents":1`, 1)
		out = append(out,
			callback{tx: txs[i], body: genuine, forged: true},
			callback{tx: txs[i], body: genuine, sig: nr.sign(other, genuine), forged: true},
			callback{tx: txs[i], body: altered, sig: nr.sign(nr.secret, genuine), forged: true})
	}
	mrand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// send sends cb to url and checks its answer; a cut connection counts as
// cut when cutOK, and fails the test otherwise.
func (nr *notifyRun) send(url string, cb callback, cutOK bool) {
	t := nr.t
	req, err := http.NewRequest(http.MethodPost, url+"/pay/notify", strings.NewReader(cb.body))
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if cb.sig != "" {
		req.Header.Set("X-Signature", cb.sig)
	}
	if cb.pause {
		req.Header.Set(pauseAfterHeader, notifyPausePoint)
	}
	if cb.forged {
		nr.forged.Add(1)
	} else {
		nr.genuine.Add(1)
	}
	resp, err := nr.c.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err == nil {
			nr.check(cb, resp, b)
			return
		}
	}
	if !cutOK {
		t.Errorf("callback %s: %v", cb.tx, err)
		return
	}
	if cb.forged {
		nr.forgedCut.Add(1)
	} else {
		nr.cut.Add(1)
	}
}

// check checks one answer.
func (nr *notifyRun) check(cb callback, resp *http.Response, body []byte) {
	t := nr.t
	if cb.forged {
		if assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a forged callback of %s: %s", cb.tx, body) {
			nr.refused.Add(1)
		}
		assert.NotContains(t, string(body), `"paid_by"`, "a forgery never gets the genuine answer")
		return
	}
	if !assert.Equal(t, http.StatusOK, resp.StatusCode, "a genuine callback of %s: %s", cb.tx, body) {
		return
	}
	nr.ok.Add(1)
	nr.mu.Lock()
	defer nr.mu.Unlock()
	if nr.answers[cb.tx] == nil {
		nr.answers[cb.tx] = map[string]int{}
	}
	nr.answers[cb.tx][string(body)]++
	if resp.Header.Get(idemhttp.ReplayedHeader) != "true" {
		nr.fresh[cb.tx]++
	}
}

// storm sends cbs to url at once.
func (nr *notifyRun) storm(url string, cbs []callback, cutOK bool, sent *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, cb := range cbs {
		wg.Go(func() {
			nr.send(url, cb, cutOK)
			if sent != nil {
				sent.Add(1)
			}
		})
	}
	return &wg
}

// place places n unpaid orders.
func (nr *notifyRun) place(url, user string, from, n int) []UnpaidOrder {
	t := nr.t
	var orders []UnpaidOrder
	for i := from; i < from+n; i++ {
		r := doHTTP(t, nr.c, http.MethodPost, url+"/orders/unpaid", user, fmt.Sprintf(`{"sku":"book","qty":%d}`, i+1),
			idemhttp.DefaultKeyHeader, fmt.Sprintf("unpaid-%d", i))
		require.Equal(t, http.StatusCreated, r.status, string(r.body))
		var o UnpaidOrder
		require.NoError(t, json.Unmarshal(r.body, &o))
		require.Equal(t, UnpaidOrder{ID: o.ID, SKU: "book", Qty: i + 1, User: user, AmountCents: (i + 1) * unitPriceCents, Status: statusUnpaid}, o)
		orders = append(orders, o)
	}
	return orders
}

// order reads an order.
func (nr *notifyRun) order(url, user string, id uint64) UnpaidOrder {
	r := doHTTP(nr.t, nr.c, http.MethodGet, fmt.Sprintf("%s/orders/unpaid/%d", url, id), user, "")
	require.Equal(nr.t, http.StatusOK, r.status, string(r.body))
	var o UnpaidOrder
	require.NoError(nr.t, json.Unmarshal(r.body, &o))
	return o
}

func (nr *notifyRun) run() string {
	t := nr.t
	nr.c = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	nr.answers, nr.fresh = map[string]map[string]int{}, map[string]int{}
	user := nr.store + "-payer"
	p := startDemo(t, nr.bin, nr.args...)
	orders := nr.place(p.url, user, 0, 2*notifyOrders)
	txs := make([]string, len(orders))
	for i := range txs {
		n, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
		txs[i] = fmt.Sprintf("tx_%s_%x", nr.store, n)
	}
	a, b := orders[:notifyOrders], orders[notifyOrders:]

	// Forgeries first: refused, and they block nothing.
	for _, cb := range nr.callbacks(orders, txs) {
		if cb.forged {
			nr.send(p.url, cb, false)
		}
	}
	for _, o := range orders {
		assert.Equal(t, statusUnpaid, nr.order(p.url, user, o.ID).Status, "a forgery paid nothing")
	}

	// Batch a: a storm, answered whole.
	nr.storm(p.url, nr.callbacks(a, txs[:notifyOrders]), false, nil).Wait()
	for i := range a {
		assert.Equal(t, 1, nr.fresh[txs[i]], "one fresh answer for %s; the others replayed", txs[i])
	}

	// Batch b: each order's first callback pauses after its writes
	// (before its answer; on PostgreSQL before the commit), its copies
	// wait for it, and the demo is SIGKILLed there.
	before := strings.Count(p.stderr.String(), crashHookLog)
	var paused sync.WaitGroup
	for i, o := range b {
		body := noticeBody(txs[notifyOrders+i], o, -1)
		paused.Go(func() {
			nr.send(p.url, callback{tx: txs[notifyOrders+i], body: body, sig: nr.sign(nr.secret, body), pause: true}, true)
		})
	}
	require.Eventually(t, func() bool { return strings.Count(p.stderr.String(), crashHookLog) == before+notifyOrders },
		20*time.Second, 5*time.Millisecond, "the callbacks never paused; stderr:\n%s", p.stderr)
	for _, o := range b {
		// On PostgreSQL the paused writes are not committed: the
		// notification and the transition commit with the record. On the
		// other stores they are written first, the record completed after.
		want := statusPaid
		if nr.db != nil {
			want = statusUnpaid
		}
		assert.Equal(t, want, nr.order(p.url, user, o.ID).Status, "order %d while its callback is paused", o.ID)
	}
	cbs := nr.callbacks(b, txs[notifyOrders:])
	var sent atomic.Int64
	wg := nr.storm(p.url, cbs, true, &sent)
	forged := int64(3 * notifyOrders)
	require.Eventually(t, func() bool { return sent.Load() >= forged }, 20*time.Second, time.Millisecond)
	p.kill()
	wg.Wait()
	paused.Wait()
	assert.Equal(t, int64(len(cbs))-forged, nr.cut.Load()-notifyOrders, "every genuine copy waited for the paused first one")

	// The restart: every callback again.
	p = startDemo(t, nr.bin, nr.args...)
	nr.storm(p.url, nr.callbacks(orders, txs), false, nil).Wait()

	var transitions, rows int
	for i, o := range orders {
		got := nr.order(p.url, user, o.ID)
		want := o
		want.Status, want.Transaction, want.Notifications, want.Transitions = statusPaid, txs[i], 1, 1
		assert.Equal(t, want, got, "order %d: paid once, by its transaction", o.ID)
		transitions += got.Transitions
		rows += got.Notifications
		nr.mu.Lock()
		assert.Len(t, nr.answers[txs[i]], 1, "every genuine callback of %s got one body", txs[i])
		nr.mu.Unlock()
	}

	// A second transaction for a paid order: recorded, answered 200, no
	// second transition.
	o := orders[0]
	tx2 := txs[0] + "_again"
	body := noticeBody(tx2, o, 0)
	r := doHTTP(t, nr.c, http.MethodPost, p.url+"/pay/notify", "", body, "X-Signature", nr.sign(nr.secret, body))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.JSONEq(t, fmt.Sprintf(`{"transaction_id":%q,"order":%d,"status":"paid","paid_by":%q}`, tx2, o.ID, txs[0]), string(r.body))
	got := nr.order(p.url, user, o.ID)
	assert.Equal(t, 2, got.Notifications, "the second transaction's notification row")
	assert.Equal(t, 1, got.Transitions, "no second transition")
	assert.Equal(t, txs[0], got.Transaction, "still paid by the first transaction")

	if nr.db != nil {
		var n, sum int
		require.NoError(t, nr.db.QueryRow(`SELECT count(*) FROM `+noticeTable).Scan(&n))
		require.NoError(t, nr.db.QueryRow(`SELECT coalesce(sum(transitions), 0) FROM `+unpaidTable).Scan(&sum))
		assert.Equal(t, len(orders)+1, n, "notification rows in PostgreSQL")
		assert.Equal(t, len(orders), sum, "transitions in PostgreSQL")
	}
	assert.Equal(t, nr.forged.Load(), nr.refused.Load()+nr.forgedCut.Load(), "every forgery refused, but those the kill cut")
	assert.Equal(t, nr.genuine.Load(), nr.ok.Load()+nr.cut.Load(), "every genuine callback answered 200, but those the kill cut")
	p.kill()
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d |", nr.store, len(orders), nr.genuine.Load(), nr.ok.Load(), nr.cut.Load(),
		nr.forged.Load(), nr.refused.Load(), nr.forgedCut.Load(), transitions, rows)
}

// Without a secret the callback route answers 503; a secret file that is
// missing or too short stops the demo at start, naming the file, never
// the secret.
func TestPayNotifySecret(t *testing.T) {
	app := newTestApp(t, nil, time.Second)
	w := app.post("/pay/notify", "", `{"transaction_id":"tx_1","order":1,"status":"paid","amount_cents":1200}`)
	problem(t, w, http.StatusServiceUnavailable, problemNotifyOff)

	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("tiny-secret\n"), 0o600))
	for file, want := range map[string]string{
		short:                                 "at least 16 are needed",
		filepath.Join(t.TempDir(), "missing"): "no such file",
	} {
		cfg := defaultConfig()
		cfg.stack.Store = "mem://"
		cfg.addr = "127.0.0.1:0"
		cfg.notifySecretFile = file
		_, err := start(context.Background(), cfg, discardLogger())
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), file)
		assert.NotContains(t, err.Error(), "tiny-secret")
	}
}

// Bad callbacks: each gets its answer, and none is recorded, so the
// provider's retry (once fixed, or once the order exists) is handled.
func TestPayNotifyRefusals(t *testing.T) {
	st := testkit.NewMem(t)
	e, err := idemkit.New(st, idemkit.WithObserver(nil))
	require.NoError(t, err)
	secret := []byte("0123456789abcdef0123456789abcdef")
	build := func(hooks bool) *testApp {
		pay, err := newPayments(&kvPayments{st: st}, "", false, discardLogger())
		require.NoError(t, err)
		pay.notify = &notifier{repo: &kvUnpaid{st: st}, secret: secret, crashHooks: hooks, log: discardLogger()}
		h, err := newTxHandler(e, newMemoryOrders(10, 10), nil, pay, time.Second, discardLogger())
		require.NoError(t, err)
		return &testApp{t: t, handler: h}
	}
	a, hooked := build(false), build(true)
	nr := &notifyRun{secret: secret}
	notify := func(a *testApp, body string, header ...string) *httptest.ResponseRecorder {
		return a.post("/pay/notify", "", body, append([]string{"X-Signature", nr.sign(secret, body)}, header...)...)
	}
	order := UnpaidOrder{ID: 1, AmountCents: 2 * unitPriceCents}
	body := noticeBody("tx_r", order, 0)

	// No order yet: 404, not recorded.
	problem(t, notify(a, body), http.StatusNotFound, problemNoOrder)
	w := a.post("/orders/unpaid", "alice", `{"sku":"book","qty":2}`, idemhttp.DefaultKeyHeader, "u1")
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	problem(t, a.post("/orders/unpaid", "alice", `{"sku":"pen","qty":2}`, idemhttp.DefaultKeyHeader, "u1"), http.StatusUnprocessableEntity, idemhttp.ProblemKeyMismatch)
	problem(t, a.get("/orders/unpaid/1", "bob"), http.StatusNotFound, problemNoOrder)
	problem(t, a.get("/orders/unpaid/x", "alice"), http.StatusNotFound, problemNoOrder)

	wrongAmount := noticeBody("tx_amount", UnpaidOrder{ID: 1, AmountCents: 1}, 0)
	problem(t, notify(a, wrongAmount), http.StatusUnprocessableEntity, problemNotifyRejected)
	problem(t, notify(a, `{"transaction_id":"tx_s","order":1,"status":"failed","amount_cents":2400}`), http.StatusBadRequest, problemInvalidBody)
	problem(t, notify(a, `{"transaction_id":"tx_o","status":"paid","amount_cents":2400}`), http.StatusBadRequest, problemInvalidBody)
	problem(t, notify(a, `{"order":1,"status":"paid","amount_cents":2400}`), http.StatusBadRequest, idemhttp.ProblemKeyMissing)
	problem(t, notify(a, `{"transaction_id":{"a":1},"order":1,"status":"paid","amount_cents":2400}`), http.StatusBadRequest, idemhttp.ProblemKeyInvalid)
	problem(t, notify(a, body, pauseAfterHeader, notifyPausePoint), http.StatusBadRequest, problemInvalidHook)
	problem(t, notify(hooked, body, pauseAfterHeader, "later"), http.StatusBadRequest, problemInvalidHook)
	problem(t, a.post("/pay/notify", "", body), http.StatusUnauthorized, idemhttp.ProblemUnauthenticated)

	// The order exists now, and the refusals left nothing: the callback
	// is handled, and a reuse of its transaction number for another
	// amount gets 422.
	w = notify(a, body)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"transaction_id":"tx_r","order":1,"status":"paid","paid_by":"tx_r"}`, w.Body.String())
	problem(t, notify(a, strings.Replace(body, `"amount_cents":2400`, `"amount_cents":1200`, 1)), http.StatusUnprocessableEntity, idemhttp.ProblemKeyMismatch)
	var o UnpaidOrder
	require.NoError(t, json.Unmarshal(a.get("/orders/unpaid/1", "alice").Body.Bytes(), &o))
	assert.Equal(t, UnpaidOrder{ID: 1, SKU: "book", Qty: 2, User: "alice", AmountCents: 2400, Status: statusPaid, Transaction: "tx_r", Notifications: 1, Transitions: 1}, o)
}

// The provider process calls the demo back: a charge with a notify_url
// for an order that does not exist yet is refused 404 and retried until
// the order exists; a replayed charge calls back no more; the order is
// paid once.
func TestProviderCallsBack(t *testing.T) {
	bin := buildDemo(t)
	secretFile := filepath.Join(t.TempDir(), "notify-secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	prov := startDemo(t, bin, "provider", "-addr", "127.0.0.1:0", "-log-level", "error", "-notify-secret-file", secretFile)
	demo := startDemo(t, bin, "-addr", "127.0.0.1:0", "-store", "bolt://"+filepath.Join(t.TempDir(), "demo.db"), "-log-level", "warn",
		"-notify-secret-file", secretFile)
	c := &http.Client{Timeout: 10 * time.Second}
	charge := `{"amount_cents":2400,"order":1,"notify_url":"` + demo.url + `/pay/notify"}`
	for range 2 {
		r := doHTTP(t, c, http.MethodPost, prov.url+"/charges", "", charge, idemhttp.DefaultKeyHeader, "charge-1")
		require.Equal(t, http.StatusCreated, r.status, string(r.body))
	}
	require.Eventually(t, func() bool { return providerStats(t, c, prov.url).NotifyAttempts >= 2 }, 10*time.Second, 5*time.Millisecond,
		"the provider retries the refused callback")
	assert.Zero(t, providerStats(t, c, prov.url).Notified)
	r := doHTTP(t, c, http.MethodPost, demo.url+"/orders/unpaid", "alice", `{"sku":"book","qty":2}`, idemhttp.DefaultKeyHeader, "u1")
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	require.Eventually(t, func() bool { return providerStats(t, c, prov.url).Notified == 1 }, 20*time.Second, 5*time.Millisecond)
	nr := &notifyRun{t: t, c: c}
	assert.Equal(t, UnpaidOrder{ID: 1, SKU: "book", Qty: 2, User: "alice", AmountCents: 2400, Status: statusPaid, Transaction: "ch_1",
		Notifications: 1, Transitions: 1}, nr.order(demo.url, "alice", 1))
	stats := providerStats(t, c, prov.url)
	assert.Equal(t, 1, stats.Charges, "the second charge was replayed")
	assert.Equal(t, 1, stats.Notified, "one callback acknowledged")
	t.Logf("callback requests sent: %d, acknowledged: %d", stats.NotifyAttempts, stats.Notified)

	plain := startDemo(t, bin, "provider", "-addr", "127.0.0.1:0", "-log-level", "error")
	r = doHTTP(t, c, http.MethodPost, plain.url+"/charges", "", charge, idemhttp.DefaultKeyHeader, "charge-2")
	requireProblem(t, r.status, r.header, r.body, http.StatusBadRequest, problemNoNotify)
	r = doHTTP(t, c, http.MethodPost, prov.url+"/charges", "", `{"amount_cents":2400,"order":1,"notify_url":"ftp://x"}`, idemhttp.DefaultKeyHeader, "charge-3")
	requireProblem(t, r.status, r.header, r.body, http.StatusBadRequest, problemNoNotify)
}
