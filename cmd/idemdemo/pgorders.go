package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/store/sqlstore"
)

// ordersTable is the PostgreSQL table of the orders, next to the
// idempotency store's table in the store URL's database.
const ordersTable = "idemdemo_orders"

// ordersSchema creates the orders table and its unique index on (user,
// deduplication key, kept as its digest: keyDigest) if they are missing.
// A NULL dedup_key (POST /orders/quick, the unprotected form) is never a
// duplicate: PostgreSQL treats NULLs in a unique index as distinct. The advisory lock keeps two
// demos starting at once on one database from racing on the catalogue.
var ordersSchema = []string{
	`SELECT pg_advisory_xact_lock(hashtext('` + ordersTable + `'))`,
	`CREATE TABLE IF NOT EXISTS ` + ordersTable + ` (
		id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		user_id    TEXT NOT NULL,
		dedup_key  TEXT,
		sku        TEXT NOT NULL,
		qty        BIGINT NOT NULL CHECK (qty > 0),
		created_at TIMESTAMPTZ NOT NULL DEFAULT now()
	)`,
	`CREATE UNIQUE INDEX IF NOT EXISTS ` + ordersTable + `_user_key ON ` + ordersTable + ` (user_id, dedup_key)`,
	paidSchema,
	unpaidSchema[0],
	unpaidSchema[1],
}

// pgOrders is an orderRepo in a PostgreSQL table, in the database of the
// idempotency store. Its unique index on (user_id, dedup_key) is the last
// guard against duplicates, as for the other repositories: an INSERT ...
// ON CONFLICT DO NOTHING either creates the order or, after a concurrent
// creator of the same key committed, finds that it created nothing.
//
// When st is set, the service creates orders through createIn in a
// transaction that also completes the request's idempotency record through
// st.Tx (see server.placeOrder): the order and the recorded response
// commit together, or neither does.
type pgOrders struct {
	db *sql.DB
	// st is the idempotency store on the same database, whose Tx view
	// completes records in an order's transaction; nil when the records
	// are not completed there (a -fallback is set).
	st *sqlstore.Store
	// events is the subject new orders are announced on through st's
	// outbox, in their transaction ("": none; -events).
	events string
}

// openPgOrders creates the orders table in the database of sq, the
// PostgreSQL idempotency store, if it is missing, and keeps orders there,
// on sq's own pool. When st is set (it is then sq) orders are created in
// transactions that complete their records through st.Tx.
func openPgOrders(ctx context.Context, sq, st *sqlstore.Store) (*pgOrders, error) {
	where := "orders on the store's PostgreSQL database"
	db := sq.DB()
	r := &pgOrders{db: db, st: st}
	if err := r.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		for _, stmt := range ordersSchema {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return nil, fmt.Errorf("%s: create table %s: %w", where, ordersTable, err)
	}
	return r, nil
}

// inTx runs fn in a transaction, which it commits when fn returns true and
// no error, and rolls back otherwise. It returns fn's error, or the
// commit's.
func (r *pgOrders) inTx(ctx context.Context, fn func(tx *sql.Tx) (commit bool, err error)) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	commit, err := fn(tx)
	if err != nil || !commit {
		_ = tx.Rollback() // the transaction may be gone with its connection
		return err
	}
	return tx.Commit()
}

// Create implements orderRepo: the insert and its lookup in a transaction
// of their own.
func (r *pgOrders) Create(ctx context.Context, o Order, dedupKey string) (Order, bool, error) {
	if err := ctx.Err(); err != nil {
		return Order{}, false, err
	}
	var order Order
	var created bool
	err := r.inTx(ctx, func(tx *sql.Tx) (bool, error) {
		var err error
		order, created, err = r.createIn(ctx, tx, o, dedupKey)
		return err == nil, err
	})
	if err != nil && !errors.Is(err, errKeyReused) {
		return Order{}, false, fmt.Errorf("orders: %w", err)
	}
	return order, created, err
}

// createIn does Create's work in the caller's transaction tx: it inserts
// the order or, when o.User already has one under dedupKey, returns that
// order (created false) or errKeyReused, as existingOrder decides. The
// insert waits for a concurrent transaction that inserted the same key and
// creates nothing if that one commits.
func (r *pgOrders) createIn(ctx context.Context, tx *sql.Tx, o Order, dedupKey string) (Order, bool, error) {
	key := sql.NullString{String: keyDigest(dedupKey), Valid: dedupKey != ""}
	err := tx.QueryRowContext(ctx,
		`INSERT INTO `+ordersTable+` (user_id, dedup_key, sku, qty) VALUES ($1, $2, $3, $4)
		 ON CONFLICT (user_id, dedup_key) DO NOTHING RETURNING id`,
		o.User, key, o.SKU, o.Qty).Scan(&o.ID)
	if err == nil {
		return o, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) || !key.Valid {
		return Order{}, false, err
	}
	existing := Order{User: o.User}
	err = tx.QueryRowContext(ctx,
		`SELECT id, sku, qty FROM `+ordersTable+` WHERE user_id = $1 AND dedup_key = $2`,
		o.User, key).Scan(&existing.ID, &existing.SKU, &existing.Qty)
	if err != nil {
		return Order{}, false, fmt.Errorf("the key's order conflicts but cannot be read: %w", err)
	}
	return existingOrder(existing, o)
}

// List implements orderRepo.
func (r *pgOrders) List(ctx context.Context, user string) ([]Order, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := r.db.QueryContext(ctx,
		`SELECT id, sku, qty FROM `+ordersTable+` WHERE user_id = $1 ORDER BY id`, user)
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	defer rows.Close()
	orders := []Order{}
	for rows.Next() {
		o := Order{User: user}
		if err := rows.Scan(&o.ID, &o.SKU, &o.Qty); err != nil {
			return nil, fmt.Errorf("orders: %w", err)
		}
		orders = append(orders, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	return orders, nil
}

// keyDigest is what the orders table keeps of a deduplication key: the
// hex SHA-256 of it, never the idempotency key or token itself, which a
// client may treat as a secret and a reader of the table must not replay.
func keyDigest(dedupKey string) string {
	sum := sha256.Sum256([]byte(dedupKey))
	return hex.EncodeToString(sum[:])
}
