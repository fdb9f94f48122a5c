package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store"
)

// Request headers the service reads.
const (
	// userHeader names the caller. The demo trusts it as an authenticating
	// gateway in front of the service would set it; see doc.go.
	userHeader = "X-User-Id"

	// Test hooks, not part of any real API. They are read and checked
	// before the idempotency middleware runs, so a malformed hook never
	// reaches the store. Headers are not part of the request fingerprint
	// (method, route, path and body are), so adding or changing a hook does
	// not make a retry a different request.
	delayHeader = "X-Demo-Delay" // sleep this long before creating the order
	stallHeader = "X-Demo-Stall" // sleep this long after creating it, before answering
	failHeader  = "X-Demo-Fail"  // "500": fail with 500 without creating anything
)

const (
	// maxHookDelay bounds X-Demo-Delay and X-Demo-Stall.
	maxHookDelay = 5 * time.Second
	// maxOrderBody bounds an order request body.
	maxOrderBody = 16 << 10
	// healthTimeout bounds the store check of GET /healthz.
	healthTimeout = 2 * time.Second
	// healthProbeKey is read from stores that cannot Ping; its absence is
	// an answer.
	healthProbeKey = "idemdemo:healthz"
)

// Problem types of the demo's own errors; the middleware's are the
// idemhttp.Problem* constants.
const (
	demoProblemBase    = "https://idemkit.dev/problems/demo/"
	problemInvalidBody = demoProblemBase + "invalid-body" // 400
	problemInvalidHook = demoProblemBase + "invalid-hook" // 400
	problemKeyReused   = demoProblemBase + "key-reused"   // 422
	problemOrdersFull  = demoProblemBase + "orders-full"  // 507
	problemDemoFailure = demoProblemBase + "demo-failure" // 500
	problemInternal    = demoProblemBase + "internal"     // 500
	problemCancelled   = demoProblemBase + "cancelled"    // 503
)

// server holds what the handlers need. Its handlers are safe for
// concurrent use.
type server struct {
	engine *idemkit.Engine
	orders orderRepo
	// txOrders, when not nil, is orders on the database of the engine's
	// store: placeOrder then creates each order in the transaction that
	// completes its idempotency record.
	txOrders  *pgOrders
	principal func(*http.Request) (string, error)
	log       *slog.Logger
}

// newHandler wires the routes: each order route behind the idemkit
// middleware of its mode, plus the token issuer, the order list and the
// health check. window is the dedup window of POST /orders/quick.
func newHandler(e *idemkit.Engine, orders orderRepo, window time.Duration, log *slog.Logger) (http.Handler, error) {
	return newTxHandler(e, orders, nil, nil, window, log)
}

// newTxHandler is newHandler whose order routes create each order in the
// transaction that completes its idempotency record, when txOrders is not
// nil (it is then orders too). pay serves POST and GET /orders/paid; nil
// keeps paid orders in the engine's store and answers POST with 503 (no
// payment provider).
func newTxHandler(e *idemkit.Engine, orders orderRepo, txOrders *pgOrders, pay *payments, window time.Duration, log *slog.Logger) (http.Handler, error) {
	s := &server{
		engine:    e,
		orders:    orders,
		txOrders:  txOrders,
		principal: demoPrincipal, // X-User-Id, or the browser page's demo cookie (ui.go)
		log:       log,
	}
	g, err := newGuards(e, s.principal, window, log)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// Wrap each handler registered on the mux (not the mux): the route
	// pattern the middleware fingerprints is only set once the mux routed.
	mux.Handle("POST /orders", s.withHooks(g.key(s.createOrder(idempotencyKeyOf))))
	mux.Handle("POST /orders/quick", s.withHooks(g.window(s.createOrder(noDedupKey))))
	mux.Handle("POST /tokens", g.issuer)
	mux.Handle("POST /orders/form", s.withHooks(g.token(s.createOrder(tokenOf))))
	mux.HandleFunc("GET /orders", s.listOrders)
	if pay == nil {
		if pay, err = newPayments(&kvPayments{st: e.Store()}, "", false, log); err != nil {
			return nil, err
		}
	}
	paidOpts := append(slices.Clip(g.keyOpts), idemhttp.WithResume(paidOrderOp, "Content-Type", userHeader))
	paid, err := idemhttp.Idempotency(e, paidOpts...)
	if err != nil {
		return nil, fmt.Errorf("idempotency middleware: %w", err)
	}
	place := pay.placePaidOrder(s.principal)
	if pay.resume, err = idemhttp.Resumer(place, paidOpts...); err != nil {
		return nil, fmt.Errorf("idempotency middleware: %w", err)
	}
	mux.Handle("POST /orders/paid", pay.withPauseHooks(paid(place)))
	mux.HandleFunc("GET /orders/paid", pay.listPaidOrders(s.principal))
	nt := pay.notify
	if nt == nil {
		nt = &notifier{repo: &kvUnpaid{st: e.Store()}, log: log}
	}
	if err := nt.register(mux, e, s.principal, g.key); err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	newProblemPages().register(mux)
	if err := registerUI(mux, s, window); err != nil {
		return nil, err
	}
	return mux, nil
}

// guards are the idemhttp middlewares, one per mode, and the token issuer.
type guards struct {
	key, window, token func(http.Handler) http.Handler
	issuer             http.Handler
	keyOpts            []idemhttp.Option // key's
}

// newGuards builds the middleware of every mode. All of them identify the
// caller the same way; the key and window routes, which read the body for
// its fingerprint, refuse one over maxOrderBody with 413 before touching
// the store (the token route reads no body: its handler bounds it); the
// window route is released early when the order
// fails (5xx), so a failed submit can be retried at once.
func newGuards(e *idemkit.Engine, principal func(*http.Request) (string, error), window time.Duration, log *slog.Logger) (guards, error) {
	common := []idemhttp.Option{idemhttp.WithPrincipal(principal), idemhttp.WithLogger(log)}
	bounded := append(slices.Clip(common), idemhttp.WithMaxBody(maxOrderBody)) // the routes that read the body
	windowOpts := slices.Concat(bounded, []idemhttp.Option{idemhttp.WithEngineOptions(
		idemkit.WithWindow(window), idemkit.WithRelease(idemkit.ReleaseOnError))})
	g := guards{keyOpts: bounded}
	var errs [4]error
	g.key, errs[0] = idemhttp.Idempotency(e, bounded...)
	g.window, errs[1] = idemhttp.Window(e, windowOpts...)
	g.token, errs[2] = idemhttp.Token(e, common...)
	g.issuer, errs[3] = idemhttp.TokenIssuer(e, common...)
	if err := errors.Join(errs[:]...); err != nil {
		return guards{}, fmt.Errorf("idempotency middleware: %w", err)
	}
	return g, nil
}

// dedupKeyFunc names the order repository's unique key for a request, or ""
// for none.
type dedupKeyFunc func(*http.Request) string

// idempotencyKeyOf keys POST /orders by the client's Idempotency-Key, so a
// retry that the idempotency record no longer stops (a crash left it in
// progress and its lease expired) still finds the first order.
func idempotencyKeyOf(r *http.Request) string {
	return "key:" + headerKey(r.Header.Get(idemhttp.DefaultKeyHeader))
}

// tokenOf keys POST /orders/form by its one-time token, for the same reason.
func tokenOf(r *http.Request) string {
	return "token:" + headerKey(r.Header.Get(idemhttp.DefaultTokenHeader))
}

// noDedupKey is for POST /orders/quick: a dedup window has no client key,
// only a fingerprint that expires, so there is nothing to make unique.
func noDedupKey(*http.Request) string { return "" }

// headerKey returns the key in an Idempotency-Key or Idempotency-Token
// header value, which the middleware already validated: an RFC 8941
// sf-string ("abc", whose only escapes are \" and \\, which strconv.Unquote
// reads alike) or a bare token (abc). Both spellings name the same key.
func headerKey(v string) string {
	v = strings.Trim(v, " \t")
	if !strings.HasPrefix(v, `"`) {
		return v
	}
	if unquoted, err := strconv.Unquote(v); err == nil {
		return unquoted
	}
	return v
}

// orderRequest is the body of every order route.
type orderRequest struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// createOrder returns the handler of the three order routes: check the
// body, run the test hooks, create the order (unique per dedupKey) and
// answer 201 with the order and its Location.
func (s *server) createOrder(dedupKey dedupKeyFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeOrderRequest(w, r)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			// Token mode does not read the body before the handler.
			writeProblem(w, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge,
				fmt.Sprintf("the request body is over %d bytes", maxOrderBody))
			return
		case err != nil:
			writeProblem(w, http.StatusBadRequest, problemInvalidBody, err.Error())
			return
		}
		h := hooksFrom(r.Context())
		if !sleep(r.Context(), h.delay) {
			writeProblem(w, http.StatusServiceUnavailable, problemCancelled, "the request was cancelled before the order was created")
			return
		}
		if h.fail {
			writeProblem(w, http.StatusInternalServerError, problemDemoFailure, failHeader+" asked for a failure; no order was created")
			return
		}
		user, _ := s.principal(r) // the middleware already answered 401 when absent
		s.placeOrder(w, r, Order{SKU: req.SKU, Qty: req.Qty, User: user}, dedupKey(r), func(w http.ResponseWriter, order Order, err error) {
			if err != nil {
				s.orderError(w, r, err)
				return
			}
			sleep(r.Context(), h.stall)
			w.Header().Set("Location", fmt.Sprintf("/orders/%d", order.ID))
			writeJSON(w, http.StatusCreated, order)
		})
	})
}

// placeOrder creates o, unique per dedupKey, and answers with what respond
// writes for the outcome of the creation.
//
// With txOrders, in a request that holds an idempotency claim, that is
// all one database transaction: the order's INSERT, then, when the
// route's store policy keeps respond's answer (the 201, or a 422), the
// completion of the idempotency record with that answer (idemhttp
// CompleteIn), then the COMMIT; the middleware then sends the recorded
// answer. So the order and the record commit together: a crash or a
// failed commit leaves neither, the key is freed and a retry creates the
// order once. An answer the policy does not keep (a 5xx), a failed
// completion or a failed commit rolls everything back and is sent as it
// is, and the middleware frees the key.
//
// Otherwise (no txOrders, or no claim: an unprotected form post, or a
// request run unguarded under -on-store-error open) the order is created
// on its own and the middleware records the answer afterwards.
func (s *server) placeOrder(w http.ResponseWriter, r *http.Request, o Order, dedupKey string, respond func(http.ResponseWriter, Order, error)) {
	ctx := r.Context()
	if s.txOrders == nil || idemkit.ClaimFromContext(ctx) == nil {
		order, _, err := s.orders.Create(ctx, o, dedupKey)
		respond(w, order, err)
		return
	}
	var answer bufferedResponse
	recorded := false
	err := s.txOrders.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		order, created, err := s.txOrders.createIn(ctx, tx, o, dedupKey)
		if err != nil && !errors.Is(err, errKeyReused) {
			err = fmt.Errorf("orders: %w", err)
		}
		respond(&answer, order, err)
		if !idemhttp.DefaultStorePolicy(answer.status()) {
			return false, nil // not recorded: roll back, send it as it is
		}
		if err := idemhttp.CompleteIn(r, s.txOrders.st.Tx(tx), answer.status(), answer.header, answer.body.Bytes()); err != nil {
			return false, fmt.Errorf("record the answer in the order's transaction: %w", err)
		}
		if created && s.txOrders.events != "" {
			if err := enqueuePlaced(ctx, s.txOrders.st.Tx(tx), s.txOrders.events, order, dedupKey); err != nil {
				return false, fmt.Errorf("announce the order in its transaction: %w", err)
			}
		}
		recorded = true
		return true, nil
	})
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "create order", "error", err)
		writeProblem(w, http.StatusInternalServerError, problemInternal, "the order could not be stored")
	case !recorded:
		answer.sendTo(w)
	}
	// Recorded and committed: write nothing, the middleware sends the
	// recorded answer.
}

// bufferedResponse is an http.ResponseWriter that keeps the response, for
// placeOrder to record it or send it.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

// Header implements http.ResponseWriter.
func (b *bufferedResponse) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

// WriteHeader implements http.ResponseWriter; only the first call counts.
func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

// Write implements http.ResponseWriter.
func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// status is the response's status: 200 when nothing set one.
func (b *bufferedResponse) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}

// sendTo writes the response to w.
func (b *bufferedResponse) sendTo(w http.ResponseWriter) {
	h := w.Header()
	for name, values := range b.header {
		h[name] = values
	}
	w.WriteHeader(b.status())
	_, _ = w.Write(b.body.Bytes())
}

// orderError answers a failed Create.
func (s *server) orderError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errKeyReused):
		writeProblem(w, http.StatusUnprocessableEntity, problemKeyReused, err.Error())
		return
	case errors.Is(err, errOrdersFull):
		writeProblem(w, http.StatusInsufficientStorage, problemOrdersFull, err.Error()+"; restart the demo or use a bolt:// store")
		return
	}
	s.log.ErrorContext(r.Context(), "create order", "error", err)
	writeProblem(w, http.StatusInternalServerError, problemInternal, "the order could not be stored")
}

// decodeOrderRequest reads an order body strictly: one JSON object with
// only the known fields, of the right types, a non-empty sku and a
// positive qty.
func decodeOrderRequest(w http.ResponseWriter, r *http.Request) (orderRequest, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxOrderBody))
	dec.DisallowUnknownFields()
	var req orderRequest
	if err := dec.Decode(&req); err != nil {
		return orderRequest{}, fmt.Errorf("the body must be a JSON object {\"sku\": string, \"qty\": integer}: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return orderRequest{}, err
		}
		return orderRequest{}, errors.New("the body must hold a single JSON object")
	}
	switch {
	case req.SKU == "":
		return orderRequest{}, errors.New("sku must be a non-empty string")
	case strings.ContainsRune(req.SKU, 0):
		return orderRequest{}, errors.New("sku must not contain NUL characters") // a PostgreSQL text cannot hold them
	case req.Qty <= 0:
		return orderRequest{}, errors.New("qty must be a positive integer")
	}
	return req, nil
}

// listOrders answers GET /orders with the caller's orders, oldest first.
func (s *server) listOrders(w http.ResponseWriter, r *http.Request) {
	user, err := s.principal(r)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated, "this request needs an "+userHeader+" header")
		return
	}
	orders, err := s.orders.List(r.Context(), user)
	if err != nil {
		s.log.ErrorContext(r.Context(), "list orders", "error", err)
		writeProblem(w, http.StatusInternalServerError, problemInternal, "the orders could not be read")
		return
	}
	writeJSON(w, http.StatusOK, orders)
}

// healthz answers GET /healthz: 200 when the idempotency store answers,
// 503 otherwise.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := pingStore(ctx, s.engine.Store()); err != nil {
		s.log.WarnContext(ctx, "health check: store does not answer", "error", err)
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable, "the idempotency store does not answer")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// pingStore checks that st answers: with its Ping when it has one,
// otherwise with a Get of a key that is never written.
func pingStore(ctx context.Context, st store.Store) error {
	if p, ok := st.(store.Pinger); ok {
		return p.Ping(ctx)
	}
	_, err := st.Get(ctx, healthProbeKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// hooks are the parsed test-hook headers of a request.
type hooks struct {
	delay, stall time.Duration
	fail         bool
}

type hooksKey struct{}

// withHooks parses the test-hook headers and hands them to next in the
// request context, or answers 400 when one is malformed. It runs before
// the idempotency middleware, so a bad hook is refused without touching
// the store and without being stored as the key's outcome. A request
// without a caller goes straight to next, whose middleware answers 401.
func (s *server) withHooks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.principal(r); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		h, err := parseHooks(r.Header)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, problemInvalidHook, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), hooksKey{}, h)))
	})
}

// hooksFrom returns the hooks withHooks stored in ctx (none when absent).
func hooksFrom(ctx context.Context) hooks {
	h, _ := ctx.Value(hooksKey{}).(hooks)
	return h
}

// parseHooks reads X-Demo-Delay, X-Demo-Stall and X-Demo-Fail.
func parseHooks(header http.Header) (hooks, error) {
	var h hooks
	var err error
	if h.delay, err = parseHookDuration(header, delayHeader); err != nil {
		return hooks{}, err
	}
	if h.stall, err = parseHookDuration(header, stallHeader); err != nil {
		return hooks{}, err
	}
	switch v := header.Get(failHeader); v {
	case "":
	case "500":
		h.fail = true
	default:
		return hooks{}, fmt.Errorf("%s: %q is not supported; the only value is 500", failHeader, v)
	}
	return h, nil
}

// parseHookDuration reads a duration header of at most maxHookDelay.
func parseHookDuration(header http.Header, name string) (time.Duration, error) {
	v := header.Get(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxHookDelay {
		return 0, fmt.Errorf("%s: %q is not a duration between 0 and %v", name, v, maxHookDelay)
	}
	return d, nil
}

// sleep waits for d, or until ctx is done; it reports whether it slept the
// whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeProblem answers status with an RFC 9457 problem, like the
// middleware's own errors.
func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	w.Header().Set("Content-Type", idemhttp.ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(idemhttp.Problem{
		Type: typ, Title: http.StatusText(status), Status: status, Detail: detail,
	})
}
