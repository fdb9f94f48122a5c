package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// Querier is what a transaction-bound View runs its statements on:
// *sql.Tx, *sql.Conn and *sql.DB all implement it.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Conn is the driver-neutral form of Querier, for adapters to other
// database APIs (package pgxstore adapts pgx.Tx and pgxpool.Pool). Exec
// returns the number of rows the statement affected.
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Rows is the result of Conn.Query; *sql.Rows implements it. A View
// scans []byte, int64 and bool columns, and closes every Rows it gets.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// querierConn adapts a Querier to Conn.
type querierConn struct{ q Querier }

func (c querierConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c querierConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return c.q.QueryContext(ctx, query, args...)
}

// stmtConn is the Store's own Conn: it runs every statement as a prepared
// statement, prepared once per statement text (and, by database/sql, once
// per pooled connection), so that a driver that would otherwise prepare,
// execute and close per call (go-sql-driver/mysql without
// interpolateParams) makes one round trip.
type stmtConn struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func (c *stmtConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.stmts[query]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok {
		st.Close()
		return prev, nil
	}
	c.stmts[query] = st
	return st, nil
}

func (c *stmtConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c *stmtConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// close closes every prepared statement.
func (c *stmtConn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for q, st := range c.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(c.stmts, q)
	}
	return first
}
