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

// querierConn adapts a Querier to Conn. On MySQL, when the Querier is a
// transaction of the Store's *sql.DB, statements that the Store has
// prepared run as those statements, on the transaction's connection
// (Tx.StmtContext): one round trip each, where a driver without
// client-side interpolation (go-sql-driver/mysql by default) would
// prepare, execute and close.
type querierConn struct {
	q     Querier
	stmts *stmtConn // the Store's statements; nil: run the query texts
}

// stmtTx is what *sql.Tx offers to run a prepared statement of its
// *sql.DB.
type stmtTx interface {
	StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt
}

// errOtherDB is the text of the error of Tx.StmtContext given a statement
// of another *sql.DB: the caller's transaction is not on the Store's pool.
const errOtherDB = "sql: Tx.Stmt: statement from different database used"

// txStmt returns the Store's statement for query bound to the transaction,
// or nil to run the query text.
func (c querierConn) txStmt(ctx context.Context, query string) *sql.Stmt {
	tx, ok := c.q.(stmtTx)
	if !ok || c.stmts == nil {
		return nil
	}
	st := c.stmts.prepared(query)
	if st == nil {
		return nil
	}
	return tx.StmtContext(ctx, st)
}

func (c querierConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := c.txStmt(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
		st.Close()
	}
	if res == nil && (err == nil || err.Error() == errOtherDB) {
		res, err = c.q.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c querierConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	if st := c.txStmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		switch {
		case err == nil:
			return stmtRows{rows, st}, nil
		case err.Error() != errOtherDB:
			st.Close()
			return nil, err
		}
		st.Close()
	}
	return c.q.QueryContext(ctx, query, args...)
}

// stmtRows closes the transaction's statement with its rows.
type stmtRows struct {
	*sql.Rows
	st *sql.Stmt
}

func (r stmtRows) Close() error {
	err := r.Rows.Close()
	r.st.Close()
	return err
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
	// Statements being prepared in the background for transactions
	// (see prepared), and what stops them.
	preparing map[string]bool
	closed    bool
	stop      context.CancelFunc
	ctx       context.Context
	wg        sync.WaitGroup
}

func newStmtConn(db *sql.DB) *stmtConn {
	ctx, stop := context.WithCancel(context.Background())
	return &stmtConn{db: db, stmts: map[string]*sql.Stmt{}, preparing: map[string]bool{}, ctx: ctx, stop: stop}
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
	return c.keep(query, st), nil
}

// keep records st as the statement for query and returns it, or returns
// the statement recorded meanwhile and closes st. After close it returns
// st unrecorded: the caller's statement stays usable, and closes with the
// pool.
func (c *stmtConn) keep(query string, st *sql.Stmt) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok {
		st.Close()
		return prev
	}
	if !c.closed {
		c.stmts[query] = st
	}
	return st
}

// prepared returns the statement for query if it is prepared, for a
// caller's transaction. Otherwise it returns nil, and prepares the
// statement on the pool in the background, so that the transaction, which
// holds a connection, never waits for another one (a pool at its
// SetMaxOpenConns would deadlock).
func (c *stmtConn) prepared(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok || c.closed || c.preparing[query] {
		return st
	}
	c.preparing[query] = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		st, err := c.db.PrepareContext(c.ctx, query)
		c.mu.Lock()
		delete(c.preparing, query)
		c.mu.Unlock()
		if err == nil {
			if c.keep(query, st) == st && c.isClosed() {
				st.Close()
			}
		}
	}()
	return nil
}

func (c *stmtConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
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

// close stops the background preparations and closes every prepared
// statement.
func (c *stmtConn) close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
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
