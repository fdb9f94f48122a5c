package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store"
)

// The payment provider (idemdemo provider): a loopback HTTP service that
// stands for a card processor. POST /charges is behind idemkit's
// Idempotency-Key middleware over a store of its own, and fenced: it keeps
// the highest fencing token (Idempotency-Fence) it has seen per key and
// refuses a lower one with 409, before the middleware runs. GET /charges
// reports what it did, for tests and the curious.
//
// With -notify-secret-file, a charge whose body names a notify_url makes
// the provider call that URL back once the charge is made, as payment
// providers notify merchants: POST {"transaction_id":<charge id>,
// "order","status":"paid","amount_cents"}, signed (X-Signature:
// sha256=<hex HMAC-SHA256 of the body> under the shared secret), retried
// with a growing delay until it gets a 2xx, for up to notifyGiveUp. A
// replayed charge (the same Idempotency-Key) does not call back again.

// providerMerchant is the provider's only caller: the order service.
const providerMerchant = "idemdemo"

// provider is the payment provider's state. Its fences and counts live in
// process memory, for the provider's lifetime.
type provider struct {
	mu      sync.Mutex
	fences  map[string]uint64 // idempotency key -> highest token seen
	charged map[string]int    // idempotency key -> charges made
	ids     []string
	calls   int // charge requests that passed the fence
	stale   int // charge requests refused for a lower token

	// secret signs callbacks; nil refuses charges with a notify_url.
	secret   []byte
	ctx      context.Context // ends the callbacks' retries
	client   *http.Client
	log      *slog.Logger
	notified int // callbacks answered 2xx
	attempts int // callback requests sent
}

// Callback retries: the first delay, the longest, and when to give up.
const (
	notifyFirstDelay = 50 * time.Millisecond
	notifyMaxDelay   = 2 * time.Second
	notifyGiveUp     = 5 * time.Minute
)

// Problem type of a charge the provider cannot call back for.
const problemNoNotify = demoProblemBase + "no-notify" // 400

// ProviderStats is GET /charges: calls that passed the fence, charges
// made (the handler ran), keys charged, keys charged more than once, calls
// refused for a stale fencing token, and the charge IDs.
type ProviderStats struct {
	Calls         int      `json:"calls"`
	Charges       int      `json:"charges"`
	Keys          int      `json:"keys"`
	DoubleCharged int      `json:"double_charged"`
	StaleFences   int      `json:"stale_fences"`
	IDs           []string `json:"ids"`
	// Notified counts callbacks answered 2xx, NotifyAttempts the
	// callback requests sent.
	Notified       int `json:"notified,omitempty"`
	NotifyAttempts int `json:"notify_attempts,omitempty"`
}

// runProvider runs idemdemo provider [-addr] [-store] [-log-level] until
// ctx is done.
func runProvider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("idemdemo provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen `address`")
	storeURL := fs.String("store", "mem://", "the provider's own idempotency store `URL`")
	secretFile := fs.String("notify-secret-file", "", "`file` holding the shared secret that signs the callbacks of charges with a notify_url (the demo's -notify-secret-file); without it such charges get 400")
	level := slog.LevelInfo
	fs.TextVar(&level, "log-level", level, "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return fmt.Errorf("%w: unexpected argument", errUsage)
	}
	log := newLogger(stderr, level)
	var secret []byte
	if *secretFile != "" {
		var err error
		if secret, err = readNotifySecret(*secretFile); err != nil {
			return err
		}
	}
	st, err := store.Open(ctx, *storeURL)
	if err != nil {
		return err
	}
	if c, ok := st.(store.Closer); ok {
		defer c.Close()
	}
	h, err := newCallingProvider(ctx, st, secret, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "idemdemo: payment provider listening on http://%s\n  store: %s\n  POST /charges (Idempotency-Key, Idempotency-Fence; a notify_url is called back with -notify-secret-file), GET /charges\n", displayAddr(ln.Addr()), store.Redact(*storeURL))
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// newProviderHandler returns the provider's routes over its store st,
// without callbacks.
func newProviderHandler(st store.Store, log *slog.Logger) (http.Handler, error) {
	return newCallingProvider(context.Background(), st, nil, log)
}

// newCallingProvider returns the provider's routes over its store st,
// calling back charges with a notify_url signed with secret (nil: none)
// until ctx ends.
func newCallingProvider(ctx context.Context, st store.Store, secret []byte, log *slog.Logger) (http.Handler, error) {
	e, err := idemkit.New(st, idemkit.WithObserver(idemkit.SlogObserver(log)))
	if err != nil {
		return nil, err
	}
	mw, err := idemhttp.Idempotency(e,
		idemhttp.WithPrincipal(func(*http.Request) (string, error) { return providerMerchant, nil }),
		idemhttp.WithMaxBody(4<<10), idemhttp.WithLogger(log))
	if err != nil {
		return nil, err
	}
	p := &provider{fences: map[string]uint64{}, charged: map[string]int{},
		secret: secret, ctx: ctx, client: &http.Client{Timeout: 10 * time.Second}, log: log}
	mux := http.NewServeMux()
	mux.Handle("POST /charges", p.fence(mw(http.HandlerFunc(p.charge))))
	mux.HandleFunc("GET /charges", p.stats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux, nil
}

// fence refuses, with 409, a charge whose fencing token is lower than the
// highest seen for its key, and remembers a higher one. A call without a
// token passes.
func (p *provider) fence(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := headerKey(r.Header.Get(idemhttp.DefaultKeyHeader))
		token, present, err := idemhttp.FenceFromRequest(r, idemhttp.FenceHeader)
		switch {
		case err != nil:
			writeProblem(w, http.StatusBadRequest, problemMalformedFence, err.Error())
			return
		case key == "" || !present:
			next.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		if token < p.fences[key] {
			p.stale++
			p.mu.Unlock()
			writeProblem(w, http.StatusConflict, problemStaleFence, "a later claim of this key has been here: the caller lost its lease")
			return
		}
		p.fences[key] = token
		p.calls++
		p.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// charge makes a charge (behind the middleware: once per key).
func (p *provider) charge(w http.ResponseWriter, r *http.Request) {
	var req chargeRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.AmountCents <= 0 {
		writeProblem(w, http.StatusBadRequest, problemInvalidBody, "the body must be {\"amount_cents\": N > 0, \"order\": id, \"notify_url\": optional URL}")
		return
	}
	if req.NotifyURL != "" {
		if p.secret == nil {
			writeProblem(w, http.StatusBadRequest, problemNoNotify, "this provider calls back only with -notify-secret-file")
			return
		}
		if u, err := url.Parse(req.NotifyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			writeProblem(w, http.StatusBadRequest, problemNoNotify, "notify_url must be an http or https URL")
			return
		}
	}
	key := headerKey(r.Header.Get(idemhttp.DefaultKeyHeader))
	p.mu.Lock()
	p.charged[key]++
	id := fmt.Sprintf("ch_%d", len(p.ids)+1)
	p.ids = append(p.ids, id)
	p.mu.Unlock()
	writeJSON(w, http.StatusCreated, charge{ID: id, AmountCents: req.AmountCents, Order: req.Order})
	if req.NotifyURL != "" {
		go p.callBack(req.NotifyURL, notice{Transaction: id, Order: req.Order, Status: statusPaid, AmountCents: req.AmountCents})
	}
}

// callBack sends n to target, signed, until it gets a 2xx, the provider
// stops, or notifyGiveUp passed.
func (p *provider) callBack(target string, n notice) {
	body, err := json.Marshal(n)
	if err != nil {
		p.log.Error("callback", "error", err)
		return
	}
	m := hmac.New(sha256.New, p.secret)
	m.Write(body)
	sig := "sha256=" + hex.EncodeToString(m.Sum(nil))
	ctx, cancel := context.WithTimeout(p.ctx, notifyGiveUp)
	defer cancel()
	for delay := notifyFirstDelay; ; delay = min(2*delay, notifyMaxDelay) {
		status := 0
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Signature", sig)
			var resp *http.Response
			if resp, err = p.client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				_ = resp.Body.Close()
				status = resp.StatusCode
			}
		}
		p.mu.Lock()
		p.attempts++
		if status >= 200 && status < 300 {
			p.notified++
		}
		p.mu.Unlock()
		if status >= 200 && status < 300 {
			return
		}
		p.log.Warn("callback refused: retrying", "transaction_id", n.Transaction, "status", status, "error", err, "in", delay)
		if !sleep(ctx, delay) {
			p.log.Warn("callback abandoned", "transaction_id", n.Transaction)
			return
		}
	}
}

// stats answers GET /charges.
func (p *provider) stats(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	s := ProviderStats{Calls: p.calls, Charges: len(p.ids), Keys: len(p.charged), StaleFences: p.stale, IDs: append([]string{}, p.ids...),
		Notified: p.notified, NotifyAttempts: p.attempts}
	for _, n := range p.charged {
		if n > 1 {
			s.DoubleCharged++
		}
	}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, s)
}
