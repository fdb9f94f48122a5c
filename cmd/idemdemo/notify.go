package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store"
)

// Pay later: POST /orders/unpaid places an order that waits for its
// payment (status unpaid), and the payment provider tells the demo the
// order was paid with a signed callback, POST /pay/notify, keyed by the
// provider's transaction number in the JSON body (idemhttp.Callback with
// idemhttp.KeyFromJSON("transaction_id")), which it retries until it gets
// a 2xx, concurrently and out of order. The handler records the
// notification, keyed by the transaction number, and moves the order from
// unpaid to paid with a conditional update (unpaid only: an order already
// paid is left as it is, and the callback still gets 200).
//
// On PostgreSQL (without a fallback) the notification row, the order's
// transition and the callback's idempotency record commit in one
// transaction (idemhttp.CompleteIn). On the other stores the order is a
// document in the idempotency store's keyspace, changed with one
// compare-and-swap that adds the notification and makes the transition,
// and the record is completed after it: a crash between the two leaves the
// record in progress until its lease ends, and the provider's retry then
// finds the notification there and changes nothing.

// notifySender is the principal a validly signed callback gets.
const notifySender = "payment-provider"

// maxNotifyBody bounds a callback's body.
const maxNotifyBody = 4 << 10

// Statuses of a pay-later order.
const statusUnpaid = "unpaid"

// Problem types of the pay-later routes.
const (
	problemNotifyOff      = demoProblemBase + "notify-off"      // 503
	problemNoOrder        = demoProblemBase + "no-order"        // 404
	problemNotifyRejected = demoProblemBase + "notify-rejected" // 422
)

// errNoOrder reports a callback or a lookup of an order that does not exist.
var errNoOrder = errors.New("no such order")

// errAmount reports a callback whose amount is not the order's.
var errAmount = errors.New("the amount is not the order's")

// UnpaidOrder is an order placed through POST /orders/unpaid: unpaid until
// a callback pays it. Notifications counts the notification rows of the
// order (one per transaction number), Transitions its changes from unpaid
// to paid (at most one).
type UnpaidOrder struct {
	ID            uint64 `json:"id"`
	SKU           string `json:"sku"`
	Qty           int    `json:"qty"`
	User          string `json:"user"`
	AmountCents   int    `json:"amount_cents"`
	Status        string `json:"status"`
	Transaction   string `json:"transaction_id,omitempty"`
	Notifications int    `json:"notifications"`
	Transitions   int    `json:"transitions"`
}

// notice is a callback's body.
type notice struct {
	Transaction string `json:"transaction_id"`
	Order       uint64 `json:"order"`
	Status      string `json:"status"`
	AmountCents int    `json:"amount_cents"`
}

// noticeAnswer is the 200 a handled callback gets, and its replays.
type noticeAnswer struct {
	Transaction string `json:"transaction_id"`
	Order       uint64 `json:"order"`
	Status      string `json:"status"`
	PaidBy      string `json:"paid_by"` // the transaction that paid the order
}

// unpaidRepo keeps pay-later orders. Create is unique per (user, dedup
// key); Apply records a notification and pays its order if unpaid, in one
// atomic, idempotent step.
type unpaidRepo interface {
	Create(ctx context.Context, o UnpaidOrder, dedupKey string) (UnpaidOrder, error)
	Get(ctx context.Context, id uint64) (UnpaidOrder, error)
	Apply(ctx context.Context, n notice) (UnpaidOrder, error)
}

// notifier is the pay-later routes' state.
type notifier struct {
	repo unpaidRepo
	// pg, when set, is repo's database: a callback's writes commit with
	// its idempotency record.
	pg *pgUnpaid
	// secret is the callbacks' shared secret; nil answers 503.
	secret []byte
	// crashHooks honours X-Demo-Pause-After: notify (-crash-hooks).
	crashHooks bool
	log        *slog.Logger
}

// notifyPausePoint is the X-Demo-Pause-After value of POST /pay/notify:
// pause after the notification's writes, before its answer (on
// PostgreSQL: before the record's completion and the commit), until the
// request ends.
const notifyPausePoint = "notify"

// pauseHook reads a callback's crash hook: whether it asks for a pause,
// or a problem to answer when the hook is malformed or off.
func (nt *notifier) pauseHook(r *http.Request) (bool, string) {
	v, ok := r.Header[http.CanonicalHeaderKey(pauseAfterHeader)]
	switch {
	case !ok:
		return false, ""
	case !nt.crashHooks:
		return false, pauseAfterHeader + " needs the -crash-hooks flag"
	case len(v) != 1 || v[0] != notifyPausePoint:
		return false, fmt.Sprintf("%s: the only value POST /pay/notify takes is %q", pauseAfterHeader, notifyPausePoint)
	}
	return true, ""
}

// pause logs the crash hook's pause and waits until the request ends.
func (nt *notifier) pause(ctx context.Context) {
	nt.log.Warn(crashHookLog, "after", notifyPausePoint)
	<-ctx.Done()
}

// readNotifySecret reads the shared secret from path: the file's bytes
// without a trailing line break. Errors name the file, never its content.
func readNotifySecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-notify-secret-file: %w", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < idemhttp.MinSecretLen {
		return nil, fmt.Errorf("-notify-secret-file %s: the secret is %d bytes, at least %d are needed", path, len(b), idemhttp.MinSecretLen)
	}
	return b, nil
}

// register adds POST /orders/unpaid, GET /orders/unpaid/{id} and POST
// /pay/notify to mux. keyed is the Idempotency-Key middleware.
func (nt *notifier) register(mux *http.ServeMux, e *idemkit.Engine, principal func(*http.Request) (string, error), keyed func(http.Handler) http.Handler) error {
	mux.Handle("POST /orders/unpaid", keyed(nt.place(principal)))
	mux.HandleFunc("GET /orders/unpaid/{id}", nt.show(principal))
	if nt.secret == nil {
		mux.HandleFunc("POST /pay/notify", func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, http.StatusServiceUnavailable, problemNotifyOff, "no callback secret: start the demo with -notify-secret-file PATH")
		})
		return nil
	}
	signed, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: notifySender, Secret: nt.secret, MaxBody: maxNotifyBody})
	if err != nil {
		return fmt.Errorf("-notify-secret-file: %w", err)
	}
	guard, err := idemhttp.Idempotency(e,
		idemhttp.WithPrincipal(signed),
		idemhttp.Callback(0),
		idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("transaction_id")),
		idemhttp.WithInclude("order", "status", "amount_cents"),
		idemhttp.WithMaxBody(maxNotifyBody),
		idemhttp.WithLogger(nt.log))
	if err != nil {
		return fmt.Errorf("idempotency middleware: %w", err)
	}
	mux.Handle("POST /pay/notify", guard(http.HandlerFunc(nt.notify)))
	return nil
}

// place handles POST /orders/unpaid: an order waiting for its payment.
func (nt *notifier) place(principal func(*http.Request) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeOrderRequest(w, r)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, problemInvalidBody, err.Error())
			return
		}
		user, _ := principal(r) // the middleware already answered 401 when absent
		o, err := nt.repo.Create(r.Context(), UnpaidOrder{SKU: req.SKU, Qty: req.Qty, User: user,
			AmountCents: req.Qty * unitPriceCents, Status: statusUnpaid}, "unpaid:"+headerKey(r.Header.Get(idemhttp.DefaultKeyHeader)))
		switch {
		case errors.Is(err, errKeyReused):
			writeProblem(w, http.StatusUnprocessableEntity, problemKeyReused, err.Error())
			return
		case err != nil:
			nt.log.ErrorContext(r.Context(), "unpaid order", "error", err)
			writeProblem(w, http.StatusInternalServerError, problemInternal, "the order could not be stored")
			return
		}
		w.Header().Set("Location", fmt.Sprintf("/orders/unpaid/%d", o.ID))
		writeJSON(w, http.StatusCreated, o)
	})
}

// show handles GET /orders/unpaid/{id}: the caller's order, with its
// notification and transition counts.
func (nt *notifier) show(principal func(*http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, err := principal(r)
		if err != nil {
			writeProblem(w, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated, "this request needs an "+userHeader+" header")
			return
		}
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			writeProblem(w, http.StatusNotFound, problemNoOrder, "no such order")
			return
		}
		o, err := nt.repo.Get(r.Context(), id)
		switch {
		case errors.Is(err, errNoOrder), err == nil && o.User != user:
			writeProblem(w, http.StatusNotFound, problemNoOrder, "no such order")
		case err != nil:
			nt.log.ErrorContext(r.Context(), "unpaid order", "error", err)
			writeProblem(w, http.StatusInternalServerError, problemInternal, "the order could not be read")
		default:
			writeJSON(w, http.StatusOK, o)
		}
	}
}

// notify handles POST /pay/notify, behind the callback middleware, which
// checked the signature and holds the transaction number's claim.
func (nt *notifier) notify(w http.ResponseWriter, r *http.Request) {
	pause, bad := nt.pauseHook(r)
	if bad != "" {
		writeProblem(w, http.StatusBadRequest, problemInvalidHook, bad)
		return
	}
	n, err := decodeNotice(r.Body)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, problemInvalidBody, err.Error())
		return
	}
	ctx := r.Context()
	if nt.pg == nil || idemkit.ClaimFromContext(ctx) == nil {
		o, err := nt.repo.Apply(ctx, n)
		if pause {
			nt.pause(ctx)
		}
		nt.answer(w, r, n, o, err)
		return
	}
	var answer bufferedResponse
	recorded := false
	err = nt.pg.orders.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		o, err := nt.pg.applyIn(ctx, tx, n)
		if pause {
			nt.pause(ctx)
		}
		nt.answer(&answer, r, n, o, err)
		if s := answer.status(); s < 200 || s > 299 {
			return false, nil // not recorded: roll back, send it as it is
		}
		if err := idemhttp.CompleteIn(r, nt.pg.orders.st.Tx(tx), answer.status(), answer.header, answer.body.Bytes()); err != nil {
			return false, fmt.Errorf("record the answer in the notification's transaction: %w", err)
		}
		recorded = true
		return true, nil
	})
	switch {
	case err != nil:
		nt.log.ErrorContext(ctx, "payment notification", "error", err)
		writeProblem(w, http.StatusInternalServerError, problemInternal, "the notification could not be stored")
	case !recorded:
		answer.sendTo(w)
	}
	// Recorded and committed: the middleware sends the recorded answer.
}

// answer writes the answer to a callback whose Apply returned o and err.
func (nt *notifier) answer(w http.ResponseWriter, r *http.Request, n notice, o UnpaidOrder, err error) {
	switch {
	case errors.Is(err, errNoOrder):
		writeProblem(w, http.StatusNotFound, problemNoOrder, fmt.Sprintf("no order %d", n.Order))
	case errors.Is(err, errAmount):
		writeProblem(w, http.StatusUnprocessableEntity, problemNotifyRejected, fmt.Sprintf("order %d costs %d cents, not %d", n.Order, o.AmountCents, n.AmountCents))
	case err != nil:
		nt.log.ErrorContext(r.Context(), "payment notification", "error", err)
		writeProblem(w, http.StatusInternalServerError, problemInternal, "the notification could not be stored")
	default:
		writeJSON(w, http.StatusOK, noticeAnswer{Transaction: n.Transaction, Order: o.ID, Status: o.Status, PaidBy: o.Transaction})
	}
}

// decodeNotice reads a callback's body: a JSON object with a transaction
// number, an order, status "paid" and a positive amount; other members
// are ignored, as providers add some.
func decodeNotice(body io.Reader) (notice, error) {
	var n notice
	if err := json.NewDecoder(body).Decode(&n); err != nil {
		return notice{}, fmt.Errorf("the body must be a JSON object {\"transaction_id\": string, \"order\": id, \"status\": \"paid\", \"amount_cents\": N}: %w", err)
	}
	switch {
	case n.Order == 0:
		return notice{}, errors.New("order must be an order id")
	case n.Status != statusPaid:
		return notice{}, fmt.Errorf("status %q: only paid notifications are handled", n.Status)
	case n.AmountCents <= 0:
		return notice{}, errors.New("amount_cents must be a positive integer")
	}
	return n, nil
}

// kvUnpaid keeps pay-later orders in the idempotency store's keyspace:
//
//	idemdemo:unpaid:seq              -> the last order id
//	idemdemo:unpaid:key:<digest>     -> the id of a (user, dedup key)'s order
//	idemdemo:unpaid:order:<id>       -> the order and its notifications
//
// Create takes an id, then fixes the (user, dedup key)'s id with SetNX
// (a loser takes the winner's id), then writes the order with SetNX, so a
// crash anywhere leaves at most an unused id. Apply changes the order's
// document with one compare-and-swap.
type kvUnpaid struct {
	st store.Store
}

// unpaidDoc is an order's document in kvUnpaid.
type unpaidDoc struct {
	Order   UnpaidOrder `json:"order"`
	Notices []string    `json:"notices"` // transaction numbers, one row each
}

const kvUnpaidPrefix = "idemdemo:unpaid:"

func unpaidOrderKey(id uint64) string { return kvUnpaidPrefix + "order:" + strconv.FormatUint(id, 10) }

// nextID takes the next order id.
func (r *kvUnpaid) nextID(ctx context.Context) (uint64, error) {
	k := kvUnpaidPrefix + "seq"
	for {
		set, ent, err := r.st.SetNX(ctx, k, []byte("1"), paidOrderTTL)
		if err != nil {
			return 0, err
		}
		if set {
			return 1, nil
		}
		n, err := strconv.ParseUint(string(ent.Value), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unpaid orders: bad sequence: %w", err)
		}
		ok, err := r.st.CompareAndSwap(ctx, k, ent.Value, []byte(strconv.FormatUint(n+1, 10)), paidOrderTTL)
		if err != nil || ok {
			return n + 1, err
		}
	}
}

// Create implements unpaidRepo.
func (r *kvUnpaid) Create(ctx context.Context, o UnpaidOrder, dedupKey string) (UnpaidOrder, error) {
	id, err := r.nextID(ctx)
	if err != nil {
		return UnpaidOrder{}, err
	}
	sum := sha256.Sum256([]byte(o.User + "\x00" + dedupKey))
	set, ent, err := r.st.SetNX(ctx, kvUnpaidPrefix+"key:"+hex.EncodeToString(sum[:16]), []byte(strconv.FormatUint(id, 10)), paidOrderTTL)
	if err != nil {
		return UnpaidOrder{}, err
	}
	if !set {
		if id, err = strconv.ParseUint(string(ent.Value), 10, 64); err != nil {
			return UnpaidOrder{}, fmt.Errorf("unpaid orders: bad key entry: %w", err)
		}
	}
	o.ID = id
	doc, err := json.Marshal(unpaidDoc{Order: o, Notices: []string{}})
	if err != nil {
		return UnpaidOrder{}, err
	}
	set, ent, err = r.st.SetNX(ctx, unpaidOrderKey(id), doc, paidOrderTTL)
	switch {
	case err != nil:
		return UnpaidOrder{}, err
	case set:
		return o, nil
	}
	var d unpaidDoc
	if err := json.Unmarshal(ent.Value, &d); err != nil {
		return UnpaidOrder{}, fmt.Errorf("unpaid orders: %w", err)
	}
	if d.Order.SKU != o.SKU || d.Order.Qty != o.Qty || d.Order.User != o.User {
		return UnpaidOrder{}, errKeyReused
	}
	return d.order(), nil
}

// order returns the document's order with its notification count.
func (d unpaidDoc) order() UnpaidOrder {
	o := d.Order
	o.Notifications = len(d.Notices)
	return o
}

// Get implements unpaidRepo.
func (r *kvUnpaid) Get(ctx context.Context, id uint64) (UnpaidOrder, error) {
	ent, err := r.st.Get(ctx, unpaidOrderKey(id))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return UnpaidOrder{}, errNoOrder
	case err != nil:
		return UnpaidOrder{}, err
	}
	var d unpaidDoc
	if err := json.Unmarshal(ent.Value, &d); err != nil {
		return UnpaidOrder{}, fmt.Errorf("unpaid orders: %w", err)
	}
	return d.order(), nil
}

// Apply implements unpaidRepo: in one compare-and-swap, add the
// notification row (once per transaction number) and move the order from
// unpaid to paid (only from unpaid).
func (r *kvUnpaid) Apply(ctx context.Context, n notice) (UnpaidOrder, error) {
	k := unpaidOrderKey(n.Order)
	for {
		ent, err := r.st.Get(ctx, k)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return UnpaidOrder{}, errNoOrder
		case err != nil:
			return UnpaidOrder{}, err
		}
		var d unpaidDoc
		if err := json.Unmarshal(ent.Value, &d); err != nil {
			return UnpaidOrder{}, fmt.Errorf("unpaid orders: %w", err)
		}
		if d.Order.AmountCents != n.AmountCents {
			return d.order(), errAmount
		}
		changed := false
		if !slices.Contains(d.Notices, n.Transaction) {
			d.Notices = append(d.Notices, n.Transaction)
			changed = true
		}
		if d.Order.Status == statusUnpaid {
			d.Order.Status, d.Order.Transaction = statusPaid, n.Transaction
			d.Order.Transitions++
			changed = true
		}
		if !changed {
			return d.order(), nil
		}
		next, err := json.Marshal(d)
		if err != nil {
			return UnpaidOrder{}, err
		}
		ok, err := r.st.CompareAndSwap(ctx, k, ent.Value, next, paidOrderTTL)
		if err != nil {
			return UnpaidOrder{}, err
		}
		if ok {
			return d.order(), nil
		}
	}
}

// Tables of the pay-later orders on PostgreSQL; created with ordersSchema,
// under its lock.
const (
	unpaidTable = "idemdemo_unpaid_orders"
	noticeTable = "idemdemo_notifications"
)

var unpaidSchema = []string{
	`CREATE TABLE IF NOT EXISTS ` + unpaidTable + ` (
		id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		user_id        TEXT NOT NULL,
		dedup_key      TEXT NOT NULL,
		sku            TEXT NOT NULL,
		qty            BIGINT NOT NULL CHECK (qty > 0),
		amount_cents   BIGINT NOT NULL,
		status         TEXT NOT NULL DEFAULT 'unpaid' CHECK (status IN ('unpaid', 'paid')),
		transaction_id TEXT,
		transitions    INT NOT NULL DEFAULT 0,
		created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
		UNIQUE (user_id, dedup_key)
	)`,
	`CREATE TABLE IF NOT EXISTS ` + noticeTable + ` (
		transaction_id TEXT PRIMARY KEY,
		order_id       BIGINT NOT NULL REFERENCES ` + unpaidTable + ` (id),
		amount_cents   BIGINT NOT NULL,
		received_at    TIMESTAMPTZ NOT NULL DEFAULT now()
	)`,
}

// pgUnpaid keeps pay-later orders and their notifications in PostgreSQL
// tables of the store's database.
type pgUnpaid struct {
	orders *pgOrders
}

// Create implements unpaidRepo.
func (r *pgUnpaid) Create(ctx context.Context, o UnpaidOrder, dedupKey string) (UnpaidOrder, error) {
	dk := keyDigest(dedupKey)
	err := r.orders.db.QueryRowContext(ctx, `INSERT INTO `+unpaidTable+` (user_id, dedup_key, sku, qty, amount_cents) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (user_id, dedup_key) DO NOTHING RETURNING id`, o.User, dk, o.SKU, o.Qty, o.AmountCents).Scan(&o.ID)
	if err == nil {
		return o, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return UnpaidOrder{}, err
	}
	var id uint64
	if err := r.orders.db.QueryRowContext(ctx, `SELECT id FROM `+unpaidTable+` WHERE user_id = $1 AND dedup_key = $2`, o.User, dk).Scan(&id); err != nil {
		return UnpaidOrder{}, err
	}
	e, err := r.Get(ctx, id)
	if err == nil && (e.SKU != o.SKU || e.Qty != o.Qty) {
		return UnpaidOrder{}, errKeyReused
	}
	return e, err
}

// unpaidColumns are an order's columns for scanUnpaid.
const unpaidColumns = `id, user_id, sku, qty, amount_cents, status, coalesce(transaction_id, ''), transitions,
	(SELECT count(*) FROM ` + noticeTable + ` n WHERE n.order_id = o.id)`

// get reads order id through q.
func (r *pgUnpaid) get(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id uint64) (UnpaidOrder, error) {
	var o UnpaidOrder
	err := q.QueryRowContext(ctx, `SELECT `+unpaidColumns+` FROM `+unpaidTable+` o WHERE id = $1`, id).
		Scan(&o.ID, &o.User, &o.SKU, &o.Qty, &o.AmountCents, &o.Status, &o.Transaction, &o.Transitions, &o.Notifications)
	if errors.Is(err, sql.ErrNoRows) {
		return UnpaidOrder{}, errNoOrder
	}
	return o, err
}

// Get implements unpaidRepo.
func (r *pgUnpaid) Get(ctx context.Context, id uint64) (UnpaidOrder, error) {
	return r.get(ctx, r.orders.db, id)
}

// Apply implements unpaidRepo, in a transaction of its own.
func (r *pgUnpaid) Apply(ctx context.Context, n notice) (UnpaidOrder, error) {
	var o UnpaidOrder
	var applyErr error
	err := r.orders.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		o, applyErr = r.applyIn(ctx, tx, n)
		return applyErr == nil, nil
	})
	if err != nil {
		return UnpaidOrder{}, err
	}
	return o, applyErr
}

// applyIn does Apply's work in tx: it inserts the notification row
// (nothing when the transaction number has one) and moves the order from
// unpaid to paid with a conditional update (0 rows: already paid).
func (r *pgUnpaid) applyIn(ctx context.Context, tx *sql.Tx, n notice) (UnpaidOrder, error) {
	var amount int
	err := tx.QueryRowContext(ctx, `SELECT amount_cents FROM `+unpaidTable+` WHERE id = $1`, n.Order).Scan(&amount)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return UnpaidOrder{}, errNoOrder
	case err != nil:
		return UnpaidOrder{}, err
	case amount != n.AmountCents:
		return UnpaidOrder{AmountCents: amount}, errAmount
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+noticeTable+` (transaction_id, order_id, amount_cents) VALUES ($1, $2, $3)
		ON CONFLICT (transaction_id) DO NOTHING`, n.Transaction, n.Order, n.AmountCents); err != nil {
		return UnpaidOrder{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+unpaidTable+` SET status = 'paid', transaction_id = $2, transitions = transitions + 1
		WHERE id = $1 AND status = 'unpaid'`, n.Order, n.Transaction); err != nil {
		return UnpaidOrder{}, err
	}
	return r.get(ctx, tx, n.Order)
}
