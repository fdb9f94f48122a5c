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
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// Paid orders: POST /orders/paid places an order in three recovery points
// (idemkit.Step) under the request's idempotency claim: "reserve stock"
// (a local write), "charge" (a call to the payment provider, see
// provider.go, with the step's derived key and the claim's fencing token)
// and "mark paid" (a local write). A retry after a crash, or after the
// first run's lease ended while it was paused, replays the steps that
// finished and runs the first unfinished one again, so the provider sees
// every charge call of an order under one key.

// Test hooks of POST /orders/paid, honoured only with -crash-hooks.
const (
	// pauseAfterHeader names the step boundary at which the handler
	// pauses: reserve (after "reserve stock"), charge-call (inside
	// "charge", before the call to the provider), charge (after "charge")
	// or paid (after "mark paid", before the answer). It logs "crash hook:
	// paused" with the boundary, then waits.
	pauseAfterHeader = "X-Demo-Pause-After"
	// pauseForHeader bounds the pause (at most maxHookDelay); without it
	// the handler waits until its request ends. After a pause at
	// charge-call the call is sent even when the request was cancelled
	// meanwhile (its lease lost), as by a caller that does not know.
	pauseForHeader = "X-Demo-Pause-For"
)

// pausePoints are the values of X-Demo-Pause-After.
var pausePoints = []string{"reserve", "charge-call", "charge", "paid"}

// crashHookLog is the message logged when a request pauses at a boundary.
const crashHookLog = "crash hook: paused"

// Problem types of POST /orders/paid.
const (
	problemPaymentsOff    = demoProblemBase + "payments-off"    // 503
	problemPaymentFailed  = demoProblemBase + "payment-failed"  // 502
	problemCrashHooksOff  = demoProblemBase + "crash-hooks-off" // 400
	problemStaleFence     = demoProblemBase + "stale-fence"     // 409, from the provider
	problemMalformedFence = demoProblemBase + "malformed-fence" // 400, from the provider
)

// maxPaidOrdersPerUser bounds a user's paid orders in the store's keyspace
// (one value per user).
const maxPaidOrdersPerUser = 200

// paidOrderTTL is how long the paid orders kept in the idempotency store
// live there.
const paidOrderTTL = 30 * 24 * time.Hour

// PaidOrder is an order placed through POST /orders/paid.
type PaidOrder struct {
	ID     uint64 `json:"id"`
	SKU    string `json:"sku"`
	Qty    int    `json:"qty"`
	User   string `json:"user"`
	Status string `json:"status"` // reserved, then paid
	Charge string `json:"charge,omitempty"`
}

// Statuses of a paid order.
const (
	statusReserved = "reserved"
	statusPaid     = "paid"
)

// payRepo keeps paid orders. Reserve and MarkPaid run inside a step's
// function and are idempotent: a step run again finds its first write.
// An implementation that writes to the database of the idempotency store
// records the step (idemkit.RecordStepIn) in the write's transaction.
type payRepo interface {
	// Reserve stores o (status reserved) unless the user already has an
	// order under dedupKey, which it then returns (errKeyReused when it
	// has another sku or qty).
	Reserve(ctx context.Context, o PaidOrder, dedupKey string) (PaidOrder, error)
	// MarkPaid sets o's status to paid with charge (again: no change).
	MarkPaid(ctx context.Context, o PaidOrder, charge string) (PaidOrder, error)
	// List returns the user's paid orders, oldest first.
	List(ctx context.Context, user string) ([]PaidOrder, error)
}

// payments is the paid-order route's configuration and state.
type payments struct {
	repo       payRepo
	provider   string       // base URL of the payment provider; "" turns the route off
	client     *http.Client // through idemhttp.Transport, forwarding the fencing token
	crashHooks bool
	log        *slog.Logger
	// resume serves a stored POST /orders/paid again, for the completer
	// (set by newTxHandler).
	resume idemkit.ResumeFunc
	// notify serves the pay-later routes (notify.go); nil keeps their
	// orders in the engine's store, with no callback secret.
	notify *notifier
}

// newPayments returns the paid-order route's state over repo, calling the
// provider at providerURL ("" answers 503).
func newPayments(repo payRepo, providerURL string, crashHooks bool, log *slog.Logger) (*payments, error) {
	tr := &idemhttp.Transport{FenceHeader: idemhttp.FenceHeader}
	if err := tr.Validate(); err != nil {
		return nil, err
	}
	return &payments{
		repo:       repo,
		provider:   strings.TrimRight(providerURL, "/"),
		client:     &http.Client{Transport: tr, Timeout: 10 * time.Second},
		crashHooks: crashHooks,
		log:        log,
	}, nil
}

type pauseKey struct{}

// pause is a request's X-Demo-Pause-After and X-Demo-Pause-For.
type pause struct {
	after string
	hold  time.Duration // 0: until the request ends
}

// withPauseHooks reads the crash hooks before the middleware runs, so a
// bad one is refused without touching the store.
func (p *payments) withPauseHooks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after := r.Header.Get(pauseAfterHeader)
		if after == "" && r.Header.Get(pauseForHeader) == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !p.crashHooks {
			writeProblem(w, http.StatusBadRequest, problemCrashHooksOff, pauseAfterHeader+" and "+pauseForHeader+" need the -crash-hooks flag")
			return
		}
		known := false
		for _, pt := range pausePoints {
			known = known || after == pt
		}
		if !known {
			writeProblem(w, http.StatusBadRequest, problemInvalidHook, fmt.Sprintf("%s: %q is not one of %s", pauseAfterHeader, after, strings.Join(pausePoints, ", ")))
			return
		}
		hold, err := parseHookDuration(r.Header, pauseForHeader)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, problemInvalidHook, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), pauseKey{}, pause{after: after, hold: hold})))
	})
}

// pauseAt pauses when the request asked for a pause at point, and reports
// whether it did.
func (p *payments) pauseAt(ctx context.Context, point string) bool {
	h, _ := ctx.Value(pauseKey{}).(pause)
	if h.after != point {
		return false
	}
	p.log.Warn(crashHookLog, "after", point)
	if h.hold == 0 {
		<-ctx.Done()
		return true
	}
	sleep(ctx, h.hold)
	return true
}

// placePaidOrder handles POST /orders/paid, behind the Idempotency-Key
// middleware: reserve stock, charge, mark paid, answer 201 with the paid
// order. A step that fails answers 5xx, which the middleware does not
// record: the retry resumes at that step.
func (p *payments) placePaidOrder(principal func(*http.Request) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.provider == "" {
			writeProblem(w, http.StatusServiceUnavailable, problemPaymentsOff, "no payment provider: start the demo with -provider URL (see idemdemo provider)")
			return
		}
		req, err := decodeOrderRequest(w, r)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, problemInvalidBody, err.Error())
			return
		}
		ctx := r.Context()
		user, err := principal(r)
		if err != nil {
			// A request the completer resumes carries the stored
			// X-User-Id, not a browser's cookie: 503 releases the
			// order for its client's retry.
			w.Header().Set("Retry-After", "1")
			writeProblem(w, http.StatusServiceUnavailable, problemCancelled, "the order cannot go on without its user; retry with the same key to resume it")
			return
		}
		dedupKey := "paid:" + headerKey(r.Header.Get(idemhttp.DefaultKeyHeader))
		reserved, err := idemkit.Step(ctx, "reserve stock", func(ctx context.Context) ([]byte, error) {
			o, err := p.repo.Reserve(ctx, PaidOrder{SKU: req.SKU, Qty: req.Qty, User: user, Status: statusReserved}, dedupKey)
			if err != nil {
				return nil, err
			}
			return json.Marshal(o)
		})
		var order PaidOrder
		if err == nil {
			err = json.Unmarshal(reserved, &order)
		}
		if err != nil {
			p.stepError(w, r, "reserve stock", err)
			return
		}
		p.pauseAt(ctx, "reserve")
		charged, err := idemkit.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			if p.pauseAt(ctx, "charge-call") {
				ctx = context.WithoutCancel(ctx) // a caller that does not know it lost its lease
			}
			return p.charge(ctx, order)
		})
		var ch charge
		if err == nil {
			err = json.Unmarshal(charged, &ch)
		}
		if err != nil {
			p.stepError(w, r, "charge", err)
			return
		}
		p.pauseAt(ctx, "charge")
		paid, err := idemkit.Step(ctx, "mark paid", func(ctx context.Context) ([]byte, error) {
			o, err := p.repo.MarkPaid(ctx, order, ch.ID)
			if err != nil {
				return nil, err
			}
			return json.Marshal(o)
		})
		if err == nil {
			order = PaidOrder{}
			err = json.Unmarshal(paid, &order)
		}
		if err != nil {
			p.stepError(w, r, "mark paid", err)
			return
		}
		p.pauseAt(ctx, "paid")
		w.Header().Set("Location", fmt.Sprintf("/orders/paid/%d", order.ID))
		writeJSON(w, http.StatusCreated, order)
	})
}

// stepError answers a failed step. Nothing of a 5xx is recorded, so the
// retry runs the step again.
func (p *payments) stepError(w http.ResponseWriter, r *http.Request, step string, err error) {
	var pe *paymentError
	switch {
	case errors.Is(err, errKeyReused):
		writeProblem(w, http.StatusUnprocessableEntity, problemKeyReused, err.Error())
	case errors.Is(err, errOrdersFull):
		writeProblem(w, http.StatusInsufficientStorage, problemOrdersFull, err.Error())
	case errors.As(err, &pe):
		p.log.WarnContext(r.Context(), "paid order: the payment provider refused the charge", "status", pe.status)
		writeProblem(w, http.StatusBadGateway, problemPaymentFailed, pe.Error())
	case errors.Is(err, idemkit.ErrLeaseLost), r.Context().Err() != nil:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, problemCancelled, "the order stopped at step "+step+" (its claim ended); retry with the same key to resume it")
	default:
		p.log.ErrorContext(r.Context(), "paid order", "step", step, "error", err)
		writeProblem(w, http.StatusInternalServerError, problemInternal, "the order stopped at step "+step+"; retry with the same key to resume it")
	}
}

// charge is the provider's answer to a charge.
type charge struct {
	ID          string `json:"id"`
	AmountCents int    `json:"amount_cents"`
	Order       uint64 `json:"order"`
}

// chargeRequest is the body of a charge.
type chargeRequest struct {
	AmountCents int    `json:"amount_cents"`
	Order       uint64 `json:"order"`
	// NotifyURL, when set, is called back once the charge is made.
	NotifyURL string `json:"notify_url,omitempty"`
}

// unitPriceCents is the price of every item.
const unitPriceCents = 1200

// paymentError is a charge the provider answered with something else
// than 201.
type paymentError struct {
	status int
	detail string
}

func (e *paymentError) Error() string {
	return fmt.Sprintf("the payment provider answered %d: %s", e.status, e.detail)
}

// charge charges order at the provider, inside the "charge" step: the
// step's derived key is the call's Idempotency-Key, and the Transport
// adds the claim's fencing token (Idempotency-Fence).
func (p *payments) charge(ctx context.Context, order PaidOrder) ([]byte, error) {
	key, ok := idemkit.StepKey(ctx)
	if !ok {
		return nil, idemkit.ErrNoOperation
	}
	body, err := json.Marshal(chargeRequest{AmountCents: order.Qty * unitPriceCents, Order: order.ID})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.provider+"/charges", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idemhttp.DefaultKeyHeader, sfString(key))
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("charge: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("charge: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		var pr idemhttp.Problem
		_ = json.Unmarshal(b, &pr)
		return nil, &paymentError{status: resp.StatusCode, detail: pr.Detail}
	}
	var ch charge
	if err := json.Unmarshal(b, &ch); err != nil || ch.ID == "" {
		return nil, fmt.Errorf("charge: the provider's answer is not a charge: %w", err)
	}
	return json.Marshal(ch)
}

// sfString writes s as an RFC 8941 sf-string.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// listPaidOrders answers GET /orders/paid with the caller's paid orders.
func (p *payments) listPaidOrders(principal func(*http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, err := principal(r)
		if err != nil {
			writeProblem(w, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated, "this request needs an "+userHeader+" header")
			return
		}
		orders, err := p.repo.List(r.Context(), user)
		if err != nil {
			p.log.ErrorContext(r.Context(), "list paid orders", "error", err)
			writeProblem(w, http.StatusInternalServerError, problemInternal, "the orders could not be read")
			return
		}
		writeJSON(w, http.StatusOK, orders)
	}
}

// kvPayments keeps paid orders in the idempotency store's keyspace: one
// value per user (under a digest of the user, never the user itself)
// holding the user's orders and their dedup keys' digests, changed with
// compare-and-swap, so Reserve and MarkPaid are atomic and idempotent on
// every store. Its step records are written by Step after the write.
type kvPayments struct {
	st store.Store
}

// paidDoc is a user's value in kvPayments.
type paidDoc struct {
	Orders []PaidOrder       `json:"orders"`
	Keys   map[string]uint64 `json:"keys"` // keyDigest(dedup key) -> order ID
}

func (r *kvPayments) key(user string) string {
	sum := sha256.Sum256([]byte(user))
	return "idemdemo:paid:" + hex.EncodeToString(sum[:16])
}

// update applies fn to the user's document until its compare-and-swap
// lands; fn reports whether it changed the document.
func (r *kvPayments) update(ctx context.Context, user string, fn func(d *paidDoc) (bool, error)) error {
	k := r.key(user)
	for {
		ent, err := r.st.Get(ctx, k)
		var old []byte
		d := paidDoc{Keys: map[string]uint64{}}
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			old = ent.Value
			if err := json.Unmarshal(old, &d); err != nil {
				return fmt.Errorf("paid orders: %w", err)
			}
		}
		changed, err := fn(&d)
		if err != nil || !changed {
			return err
		}
		next, err := json.Marshal(d)
		if err != nil {
			return err
		}
		var set bool
		if old == nil {
			set, _, err = r.st.SetNX(ctx, k, next, paidOrderTTL)
		} else {
			set, err = r.st.CompareAndSwap(ctx, k, old, next, paidOrderTTL)
		}
		if err != nil || set {
			return err
		}
	}
}

// Reserve implements payRepo.
func (r *kvPayments) Reserve(ctx context.Context, o PaidOrder, dedupKey string) (PaidOrder, error) {
	var out PaidOrder
	err := r.update(ctx, o.User, func(d *paidDoc) (bool, error) {
		if id, ok := d.Keys[keyDigest(dedupKey)]; ok {
			for _, e := range d.Orders {
				if e.ID == id {
					if e.SKU != o.SKU || e.Qty != o.Qty {
						return false, errKeyReused
					}
					out = e
					return false, nil
				}
			}
			return false, fmt.Errorf("paid orders: key points to missing order %d", id)
		}
		if len(d.Orders) >= maxPaidOrdersPerUser {
			return false, fmt.Errorf("%w for this user (%d paid orders)", errOrdersFull, maxPaidOrdersPerUser)
		}
		out = o
		out.ID = uint64(len(d.Orders) + 1)
		d.Orders = append(d.Orders, out)
		d.Keys[keyDigest(dedupKey)] = out.ID
		return true, nil
	})
	return out, err
}

// MarkPaid implements payRepo.
func (r *kvPayments) MarkPaid(ctx context.Context, o PaidOrder, charge string) (PaidOrder, error) {
	var out PaidOrder
	err := r.update(ctx, o.User, func(d *paidDoc) (bool, error) {
		for i, e := range d.Orders {
			if e.ID != o.ID {
				continue
			}
			switch e.Charge {
			case charge:
				out = e
				return false, nil
			case "":
				d.Orders[i].Status, d.Orders[i].Charge = statusPaid, charge
				out = d.Orders[i]
				return true, nil
			}
			return false, fmt.Errorf("paid orders: order %d was paid by another charge", o.ID)
		}
		return false, fmt.Errorf("paid orders: no order %d", o.ID)
	})
	return out, err
}

// List implements payRepo.
func (r *kvPayments) List(ctx context.Context, user string) ([]PaidOrder, error) {
	ent, err := r.st.Get(ctx, r.key(user))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return []PaidOrder{}, nil
	case err != nil:
		return nil, err
	}
	var d paidDoc
	if err := json.Unmarshal(ent.Value, &d); err != nil {
		return nil, fmt.Errorf("paid orders: %w", err)
	}
	return append([]PaidOrder{}, d.Orders...), nil
}

// paidTable is the PostgreSQL table of the paid orders.
const paidTable = "idemdemo_paid_orders"

// paidSchema creates paidTable; run with ordersSchema, under its lock.
var paidSchema = `CREATE TABLE IF NOT EXISTS ` + paidTable + ` (
		id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		user_id    TEXT NOT NULL,
		dedup_key  TEXT NOT NULL,
		sku        TEXT NOT NULL,
		qty        BIGINT NOT NULL CHECK (qty > 0),
		charge     TEXT,
		created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
		UNIQUE (user_id, dedup_key)
	)`

// pgPayments keeps paid orders in paidTable, in the database of the
// idempotency store: each write and its step's recovery point commit in
// one transaction (idemkit.RecordStepIn through st.Tx), so a crash
// leaves both or neither.
type pgPayments struct {
	db *sql.DB
	st *sqlstore.Store
}

// inStep runs write in a transaction that also records the step's result
// (the order write returns, as JSON), and commits.
func (r *pgPayments) inStep(ctx context.Context, write func(tx *sql.Tx) (PaidOrder, error)) (PaidOrder, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return PaidOrder{}, err
	}
	o, err := write(tx)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(o); err == nil {
			err = idemkit.RecordStepIn(ctx, r.st.Tx(tx), b)
		}
	}
	if err != nil {
		_ = tx.Rollback()
		return PaidOrder{}, err
	}
	return o, tx.Commit()
}

// Reserve implements payRepo.
func (r *pgPayments) Reserve(ctx context.Context, o PaidOrder, dedupKey string) (PaidOrder, error) {
	return r.inStep(ctx, func(tx *sql.Tx) (PaidOrder, error) {
		dk := keyDigest(dedupKey)
		err := tx.QueryRowContext(ctx, `INSERT INTO `+paidTable+` (user_id, dedup_key, sku, qty) VALUES ($1, $2, $3, $4)
			ON CONFLICT (user_id, dedup_key) DO NOTHING RETURNING id`, o.User, dk, o.SKU, o.Qty).Scan(&o.ID)
		if !errors.Is(err, sql.ErrNoRows) {
			return o, err
		}
		e, err := scanPaid(tx.QueryRowContext(ctx, `SELECT id, user_id, sku, qty, charge FROM `+paidTable+` WHERE user_id = $1 AND dedup_key = $2`, o.User, dk))
		switch {
		case err != nil:
			return PaidOrder{}, err
		case e.SKU != o.SKU || e.Qty != o.Qty:
			return PaidOrder{}, errKeyReused
		}
		return e, nil
	})
}

// MarkPaid implements payRepo.
func (r *pgPayments) MarkPaid(ctx context.Context, o PaidOrder, charge string) (PaidOrder, error) {
	return r.inStep(ctx, func(tx *sql.Tx) (PaidOrder, error) {
		e, err := scanPaid(tx.QueryRowContext(ctx, `UPDATE `+paidTable+` SET charge = $1 WHERE id = $2 AND user_id = $3 AND (charge IS NULL OR charge = $1)
			RETURNING id, user_id, sku, qty, charge`, charge, o.ID, o.User))
		if errors.Is(err, sql.ErrNoRows) {
			return PaidOrder{}, fmt.Errorf("paid orders: order %d is missing or was paid by another charge", o.ID)
		}
		return e, err
	})
}

// List implements payRepo.
func (r *pgPayments) List(ctx context.Context, user string) ([]PaidOrder, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, user_id, sku, qty, charge FROM `+paidTable+` WHERE user_id = $1 ORDER BY id`, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	orders := []PaidOrder{}
	for rows.Next() {
		o, err := scanPaid(rows)
		if err != nil {
			return nil, err
		}
		orders = append(orders, o)
	}
	return orders, rows.Err()
}

// scanPaid reads a paid order row: id, user_id, sku, qty, charge.
func scanPaid(row interface{ Scan(...any) error }) (PaidOrder, error) {
	var o PaidOrder
	var ch sql.NullString
	if err := row.Scan(&o.ID, &o.User, &o.SKU, &o.Qty, &ch); err != nil {
		return PaidOrder{}, err
	}
	o.Status, o.Charge = statusReserved, ch.String
	if ch.Valid {
		o.Status = statusPaid
	}
	return o, nil
}
