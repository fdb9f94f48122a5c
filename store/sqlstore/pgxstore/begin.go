package pgxstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// BatchSender is what a Tx begins on: a *pgx.Conn, a *pgxpool.Pool or a
// *pgxpool.Conn.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Tx is a transaction whose BEGIN travels with its first statement, in
// one round trip (pgx.Batch.BeginTx): a step or a handler whose
// transaction starts with a claim (a View's SetNX, the engine's Begin
// through OnStore) saves the round trip that BEGIN costs on its own. It
// is a Querier, so View(s, tx) runs on it; it is not safe for concurrent
// use, as a pgx.Tx is not.
//
// Commit and Rollback of a Tx that sent no statement do nothing.
type Tx struct {
	on   BatchSender
	opts pgx.TxOptions
	tx   pgx.Tx // begun with the first statement
}

// Begin returns a Tx on on with opts. Nothing is sent until its first
// statement.
func Begin(on BatchSender, opts pgx.TxOptions) *Tx {
	return &Tx{on: on, opts: opts}
}

// errBegun reports a statement after the first one failed to begin.
var errBegun = errors.New("pgxstore: the transaction's first statement failed; it has no transaction")

// first sends BEGIN and query in one batch, and returns its results with
// the BEGIN's read.
func (t *Tx) first(ctx context.Context, query string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.BeginTx(t.opts)
	b.Queue(query, args...)
	br := t.on.SendBatch(ctx, b)
	t.tx = br.Tx()
	if t.tx == nil {
		t.tx = failedTx{}
	}
	if _, err := br.Exec(); err != nil { // the BEGIN
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// Exec runs sql in the transaction, beginning it with the first call.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.tx != nil {
		return t.tx.Exec(ctx, sql, args...)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// Query runs sql in the transaction, beginning it with the first call.
// The rows of the first call must be closed before the Tx is used again.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.tx != nil {
		return t.tx.Query(ctx, sql, args...)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// Commit commits the transaction, if it began.
func (t *Tx) Commit(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	return t.tx.Commit(ctx)
}

// Rollback rolls the transaction back, if it began; after Commit it does
// nothing, so it can be deferred.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	err := t.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

// Tx returns the pgx.Tx once the first statement began it, and nil before.
func (t *Tx) Tx() pgx.Tx {
	if _, failed := t.tx.(failedTx); failed {
		return nil
	}
	return t.tx
}

// batchRows are the rows of the first statement: closing them ends the
// batch, after which the transaction serves further statements.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// failedTx stands for the transaction of a batch that did not begin one.
type failedTx struct{ pgx.Tx }

func (failedTx) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errBegun
}
func (failedTx) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errBegun }
func (failedTx) Commit(context.Context) error                            { return errBegun }
func (failedTx) Rollback(context.Context) error                          { return nil }
