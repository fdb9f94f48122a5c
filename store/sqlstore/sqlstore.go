package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Compile-time checks of the interfaces a Store and a View implement.
var (
	_ store.Store  = (*Store)(nil)
	_ store.Closer = (*Store)(nil)
	_ store.Pinger = (*Store)(nil)
	_ store.Store  = (*View)(nil)
)

// Store is a store.Store over one table of a SQL database reached through
// database/sql. It runs each operation as autocommit statements on the
// pool it was given, and hands out Views that run the same operations
// inside a caller's transaction. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	q    *queries
	ob   *outboxQueries
	cfg  config
	own  *stmtConn
	view *View
	// MySQL features, asked of the server once: feature values.
	returning, skipLocked atomic.Int32

	stop     context.CancelFunc
	wg       sync.WaitGroup
	closeErr error
	once     sync.Once
	isClosed atomic.Bool
	ownsDB   bool // opened by store.Open: Close closes db
}

// New returns a Store over table DefaultTable (see WithTable) of db in
// dialect d, and starts its sweeper (see WithSweepInterval,
// WithoutSweeper). The table must exist: create it with CreateTable or
// with the statements of Schema. New makes no round trip. db stays the
// caller's: Close does not close it. Errors wrap store.ErrInvalid.
func New(db *sql.DB, d Dialect, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlstore.New: nil *sql.DB", store.ErrInvalid)
	}
	if d.d == nil {
		return nil, fmt.Errorf("%w: sqlstore.New: invalid dialect (use sqlstore.Postgres or sqlstore.MySQL)", store.ErrInvalid)
	}
	cfg, err := newConfig(opts, d.d == &postgres)
	if err != nil {
		return nil, fmt.Errorf("sqlstore.New: %w", err)
	}
	s := &Store{db: db, q: newQueries(d.d, cfg.table), ob: newOutboxQueries(d.d, cfg.outboxTable), cfg: cfg, own: newStmtConn(db)}
	s.returning.Store(int32(cfg.returning))
	s.view = &View{s: s, c: s.own, own: true, async: cfg.asyncClaims}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if cfg.sweep {
		s.wg.Add(1)
		go s.sweepLoop(ctx)
	}
	return s, nil
}

// Dialect returns the Store's dialect.
func (s *Store) Dialect() Dialect { return Dialect{s.q.base} }

// DB returns the pool the Store works on, for business transactions on
// the same database whose records complete through Tx. A Store opened
// from a URL (store.Open) owns its pool and closes it on Close; a Store
// from New leaves the pool to its caller.
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the Store's table name, as given to WithTable.
func (s *Store) Table() string { return s.cfg.table }

// CreateTable creates the Store's table and its expiry index if they do
// not exist: the statements of Schema, run in order. Migration tools can
// run Schema's statements instead.
func (s *Store) CreateTable(ctx context.Context) error {
	stmts, err := Schema(s.Dialect(), s.cfg.table)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if _, err := s.db.ExecContext(ctx, st); err != nil {
			return wrap(ctx, "create table", "", err)
		}
	}
	return nil
}

// Ping checks that the database answers and that the Store's table
// exists. It returns nil or an error wrapping store.ErrUnavailable; when
// the table is missing the error names it and the remedies (create_table=true
// in the store URL, CreateTable, or Schema's statements), so that a
// readiness probe fails rather than answering ok while every operation
// fails.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlstore: ping: %w: %w", store.ErrUnavailable, err)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT 1 FROM "+s.q.table+" WHERE 1 = 0")
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		if noTable(err) {
			return fmt.Errorf("sqlstore: ping: %w: table %s does not exist; create it with create_table=true in the store URL, Store.CreateTable, or the statements of sqlstore.Schema", store.ErrUnavailable, s.cfg.table)
		}
		return fmt.Errorf("sqlstore: ping: table %s: %w: %w", s.cfg.table, store.ErrUnavailable, err)
	}
	return nil
}

// noTable reports whether err says a table does not exist: SQLSTATE 42P01
// (PostgreSQL) or server error 1146 (MySQL, MariaDB).
func noTable(err error) bool {
	if st, ok := sqlState(err); ok {
		return st == "42P01"
	}
	n, ok := mysqlNumber(err)
	return ok && n == 1146
}

// Close stops the sweeper, waiting for a pass in progress to end, and
// closes the Store's prepared statements. It does not close the *sql.DB
// given to New (it does close the one store.Open opened).
// Operations on the Store then fail with ErrClosed; Views keep working.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.isClosed.Store(true)
		s.stop()
		s.wg.Wait()
		s.closeErr = s.own.close()
		if s.ownsDB {
			s.closeErr = errors.Join(s.closeErr, s.db.Close())
		}
	})
	return s.closeErr
}

// Tx returns a View of the Store whose operations run on q, typically the
// caller's *sql.Tx: a CompareAndSwap through it commits or rolls back with
// the caller's other statements. See the package documentation's
// Transactions section. A nil q gives a View whose operations fail with
// store.ErrInvalid.
func (s *Store) Tx(q Querier) *View {
	if q == nil {
		return &View{s: s}
	}
	return &View{s: s, c: querierConn{q: q, stmts: s.txStmts()}}
}

// txStmts returns the statements a View on a caller's transaction runs
// prepared (see querierConn), or nil. On PostgreSQL pgx's own statement
// cache already makes each statement one round trip, and database/sql's
// bookkeeping of transaction statements measured slower than it.
func (s *Store) txStmts() *stmtConn {
	if s.q.base == &mysql {
		return s.own
	}
	return nil
}

// On returns a View of the Store whose operations run on c, for adapters
// to database APIs other than database/sql (see package pgxstore). A nil
// c gives a View whose operations fail with store.ErrInvalid.
func (s *Store) On(c Conn) *View {
	return &View{s: s, c: c}
}

// SetNX implements store.Store.
func (s *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	return s.view.SetNX(ctx, key, value, ttl)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	return s.view.Get(ctx, key)
}

// CompareAndSwap implements store.Store.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	return s.view.CompareAndSwap(ctx, key, old, new, ttl)
}

// CompareAndDelete implements store.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	return s.view.CompareAndDelete(ctx, key, old)
}

// Consume implements store.Store.
func (s *Store) Consume(ctx context.Context, key string) ([]byte, error) {
	return s.view.Consume(ctx, key)
}

// SetNXBatch implements store.Batcher; see View.SetNXBatch.
func (s *Store) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	return s.view.SetNXBatch(ctx, items)
}

// feature records whether a server feature is known to be there.
type feature int32

const (
	featureUnknown feature = iota
	featureYes
	featureNo
)

// mysqlReturning reports whether the server supports INSERT and DELETE
// ... RETURNING (MariaDB 10.5 or later), asking it once, through c: the
// View's connection, so that a View in a caller's transaction never waits
// for a second connection of a pool at its limit.
func (s *Store) mysqlReturning(ctx context.Context, c Conn) (bool, error) {
	switch feature(s.returning.Load()) {
	case featureYes:
		return true, nil
	case featureNo:
		return false, nil
	}
	var version string
	found, err := queryOne(ctx, c, "SELECT VERSION()", nil, &version)
	switch {
	case err != nil:
		return false, err
	case !found:
		return false, fmt.Errorf("SELECT VERSION() returned no row")
	}
	r := featureNo
	if mariaDBAtLeast(version, 10, 5) {
		r = featureYes
	}
	s.returning.Store(int32(r))
	return r == featureYes, nil
}

// version asks the server its version.
func (s *Store) version(ctx context.Context) (string, error) {
	var version string
	if err := s.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			err = fmt.Errorf("SELECT VERSION() returned no row")
		}
		return "", err
	}
	return version, nil
}

func (s *Store) closed() bool { return s.isClosed.Load() }
