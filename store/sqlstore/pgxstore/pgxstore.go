// Package pgxstore lets users of pgx's native API (github.com/jackc/pgx/v5)
// run sqlstore operations on a pgx.Tx, a pgx.Conn or a pgxpool.Pool, so
// that an idempotency record completes inside the same transaction as the
// business write, without database/sql.
//
// The Store itself (sweeper, CreateTable) lives in package sqlstore over a
// *sql.DB; pgxstore only adapts the connection a View runs on:
//
//	view := pgxstore.View(s, tx) // s is a *sqlstore.Store with sqlstore.Postgres
//	ok, err := view.CompareAndSwap(ctx, key, claim, done, ttl)
//
// Package sqlstore imports no driver; this package is where pgx comes in.
package pgxstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idemkit/store/sqlstore"
)

// Querier is the part of pgx.Tx, *pgx.Conn and *pgxpool.Pool a View uses.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Conn adapts q to sqlstore.Conn. A nil q gives a nil Conn, whose View
// fails every operation with store.ErrInvalid.
func Conn(q Querier) sqlstore.Conn {
	if q == nil {
		return nil
	}
	return conn{q}
}

// View returns the View of s whose operations run on q, typically the
// caller's pgx.Tx. s must use the sqlstore.Postgres dialect.
func View(s *sqlstore.Store, q Querier) *sqlstore.View {
	return s.On(Conn(q))
}

type conn struct{ q Querier }

func (c conn) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (c conn) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	rows, err := c.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

// pgxRows gives pgx.Rows the Close of sqlstore.Rows.
type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}
