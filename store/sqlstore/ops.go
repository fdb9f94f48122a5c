package sqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemkit/idemkit/store"
)

// View runs a Store's operations on one connection or transaction: the
// Store's own pool (autocommit statements) or a caller's transaction (see
// Store.Tx and Store.On). It implements store.Store and store.Batcher; it
// is as safe for concurrent use as the connection it runs on (a *sql.Tx is
// not meant to be shared).
type View struct {
	s   *Store
	c   Conn // nil for a View over a nil Querier or Conn
	own bool // the Store's own pool: each statement commits on its own
	// async: SetNX commits without waiting for the WAL flush (the Store's
	// own claims under WithAsyncClaims; PostgreSQL only)
	async bool
}

// maxAttempts bounds the loops of operations that run a statement again
// when a concurrent writer changed the key between two of their
// statements (or, on the Store's own pool, made them a deadlock victim).
const maxAttempts = 16

// check refuses a View with no connection and the closed Store's own View.
func (v *View) check(op, key string) error {
	where := op
	if key != "" {
		where += " " + keyRef(key)
	}
	switch {
	case v.c == nil:
		return fmt.Errorf("sqlstore: %s: %w: the View has no connection (nil Querier or Conn)", where, store.ErrInvalid)
	case v.own && v.s.closed():
		return fmt.Errorf("%s: %w", where, ErrClosed)
	}
	return nil
}

// wrap is the package's wrap for the View's operations. On the Store's
// own pool, once Close has begun, a failure is reported as ErrClosed:
// Close closes the prepared statements (and the pool store.Open opened)
// under an operation already running, which then fails with database/sql's
// "statement is closed" or "database is closed".
func (v *View) wrap(ctx context.Context, op, key string, err error) error {
	if v.own && v.s.closed() && ctx.Err() == nil {
		where := op
		if key != "" {
			where += " " + keyRef(key)
		}
		return fmt.Errorf("sqlstore: %s: %w (%w)", where, ErrClosed, err)
	}
	return wrap(ctx, op, key, err)
}

// retry runs attempt until it reports done, an error that a new attempt
// cannot cure, or maxAttempts. Deadlock victims are retried only on the
// Store's own pool: in a caller's transaction the server rolled back the
// whole transaction, which the caller must see.
func (v *View) retry(ctx context.Context, op, key string, attempt func() (done bool, err error)) error {
	for range maxAttempts {
		done, err := attempt()
		switch {
		case err == nil && done:
			return nil
		case err == nil, err == errRetry:
		case isScan(err):
			return corrupt(op, key, err)
		case v.own && retryable(err) && ctx.Err() == nil:
		default:
			return v.wrap(ctx, op, key, err)
		}
	}
	return wrap(ctx, op, key, errContended)
}

// SetNX implements store.Store.
func (v *View) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, existing store.Entry, err error) {
	if err := store.CheckSet(key, value, ttl); err != nil {
		return false, store.Entry{}, err
	}
	if err := v.check("setnx", key); err != nil {
		return false, store.Entry{}, err
	}
	ms := store.RoundTTL(ttl).Milliseconds()
	err = v.retry(ctx, "setnx", key, func() (bool, error) {
		var found bool
		var err error
		if v.s.q.base == &postgres {
			set, existing, found, err = v.pgSetNX(ctx, key, value, ms)
		} else {
			set, existing, found, err = v.mySetNX(ctx, key, value, ms)
		}
		return found, err
	})
	if err != nil {
		return false, store.Entry{}, err
	}
	return set, existing, nil
}

// pgSetNX runs the one-statement SetNX. It reports done=false when the
// statement returned no row: a concurrent claim committed after its
// snapshot, which the next statement sees.
func (v *View) pgSetNX(ctx context.Context, key string, value []byte, ms int64) (set bool, e store.Entry, done bool, err error) {
	var val []byte
	var ttl int64
	query := v.s.q.setnx
	if v.async {
		query = v.s.q.setnxAsync
	}
	done, err = queryOne(ctx, v.c, query, []any{[]byte(key), value, ms}, &set, &val, &ttl)
	if err != nil || !done || set {
		return set, store.Entry{}, done, err
	}
	return false, entry(val, ttl), true, nil
}

// mySetNX claims key. On MariaDB 10.5 or later it is one statement (see
// myUpsert), on the Store's own pool and in a View alike. Otherwise, on
// the Store's own pool, it takes at most three autocommit statements, each
// atomic on its own: read a live row (a replay costs one round trip);
// insert if no row; replace an expired row. In a View it is myUpsertRow.
//
// In a View the first statement takes the key's row exclusively, so that
// concurrent claims of one key queue on it. An INSERT IGNORE of a
// duplicate key takes a shared lock, which the transaction keeps: two
// duplicates holding it that then ask for the exclusive one (to replace
// the row, or to complete it) deadlock, one rolled back by the server.
func (v *View) mySetNX(ctx context.Context, key string, value []byte, ms int64) (set bool, e store.Entry, done bool, err error) {
	ret, err := v.s.mysqlReturning(ctx, v.c)
	switch {
	case err != nil:
		return false, store.Entry{}, false, err
	case ret:
		return v.myUpsert(ctx, key, value, ms)
	case !v.own:
		return v.myUpsertRow(ctx, key, value, ms)
	}
	q, k := v.s.q, []byte(key)
	if e, found, err := v.read(ctx, q.get, k); err != nil || found {
		return false, e, found, err
	}
	for _, st := range []struct {
		query string
		args  []any
	}{{q.insert, []any{k, value, ms * 1000}}, {q.reclaim, []any{value, ms * 1000, k}}} {
		n, err := v.c.Exec(ctx, st.query, st.args...)
		if err != nil || n == 1 {
			return n == 1, store.Entry{}, n == 1, err
		}
	}
	return false, store.Entry{}, false, nil
}

// myUpsertRow is a View's SetNX on MySQL, which has no RETURNING: myUpsert's
// statement without it, which takes the row exclusively whatever it
// finds, then a read of the row under that lock. The read is a locking
// one, which sees the latest committed row (and the transaction's own
// write) whatever the isolation level; the row's revision tells whether
// the statement wrote it. An affected-row count of 2 (an expired row
// replaced) says so without the read; 1 does not, since a client with
// the found-rows flag counts a live row left as it was as 1 too.
func (v *View) myUpsertRow(ctx context.Context, key string, value []byte, ms int64) (set bool, e store.Entry, done bool, err error) {
	rev := rand.Int64N(maxRev-minRev) + minRev
	k := []byte(key)
	n, err := v.c.Exec(ctx, v.s.q.upsertRow, k, value, ms*1000, rev)
	if err != nil || n == 2 {
		return n == 2, store.Entry{}, n == 2, err
	}
	var got, ttl int64
	var val []byte
	found, err := queryOne(ctx, v.c, v.s.q.lockRow, []any{k}, &got, &val, &ttl)
	switch {
	case err != nil || !found:
		return false, store.Entry{}, false, err
	case got == rev:
		return true, store.Entry{}, true, nil
	case ttl <= 0:
		// The live row the statement found expired before the read: run
		// again, to replace it.
		return false, store.Entry{}, false, nil
	}
	return false, entry(val, ttl), true, nil
}

// myUpsert claims key in one statement, INSERT ... ON DUPLICATE KEY
// UPDATE ... RETURNING, which inserts the row, or replaces an expired
// one, or leaves a live one as it is, and returns the row as the
// statement left it, read under its exclusive lock: the latest committed
// row whatever the isolation level. The row written gets a fresh random
// revision, drawn from [2^32, 2^62), and the statement set the key
// exactly when the row it returns has that revision: a live row holds
// another one, except with a probability of the order of 2^-62 (a
// revision only changes by +1 per write afterwards).
func (v *View) myUpsert(ctx context.Context, key string, value []byte, ms int64) (set bool, e store.Entry, done bool, err error) {
	rev := rand.Int64N(maxRev-minRev) + minRev
	var got, ttl int64
	var val []byte
	done, err = queryOne(ctx, v.c, v.s.q.upsert, []any{[]byte(key), value, ms * 1000, rev}, &got, &val, &ttl)
	switch {
	case err != nil || !done:
		return false, store.Entry{}, false, err
	case got == rev:
		return true, store.Entry{}, true, nil
	}
	return false, entry(val, ttl), true, nil
}

// myUpsert's revisions are at least minRev, above the small counters of
// rows written by the other statements, and below maxRev, far enough
// from the BIGINT limit for the +1 of every later write.
const (
	minRev = 1 << 32
	maxRev = 1 << 62
)

// read runs a Get-shaped query.
func (v *View) read(ctx context.Context, query string, key []byte) (store.Entry, bool, error) {
	var val []byte
	var ttl int64
	found, err := queryOne(ctx, v.c, query, []any{key}, &val, &ttl)
	if err != nil || !found {
		return store.Entry{}, false, err
	}
	return entry(val, ttl), true, nil
}

// entry builds an Entry from a scanned row. A NOT NULL column scans an
// empty value as nil with some drivers; the contract returns it non-nil.
func entry(val []byte, ttlMillis int64) store.Entry {
	if val == nil {
		val = []byte{}
	}
	// A row read as live has time left, if less than a millisecond by
	// the time the TTL was computed (see myTTL).
	return store.Entry{Value: val, TTL: time.Duration(max(ttlMillis, 1)) * time.Millisecond}
}

// Get implements store.Store.
func (v *View) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, err
	}
	if err := v.check("get", key); err != nil {
		return store.Entry{}, err
	}
	var e store.Entry
	var found bool
	err := v.retry(ctx, "get", key, func() (bool, error) {
		var err error
		e, found, err = v.read(ctx, v.s.q.get, []byte(key))
		return true, err
	})
	switch {
	case err != nil:
		return store.Entry{}, err
	case !found:
		return store.Entry{}, fmt.Errorf("sqlstore: get %s: %w", keyRef(key), store.ErrNotFound)
	}
	return e, nil
}

// CompareAndSwap implements store.Store: one conditional UPDATE.
func (v *View) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := store.CheckSwap(key, old, new, ttl); err != nil {
		return false, err
	}
	if err := v.check("compare-and-swap", key); err != nil {
		return false, err
	}
	ms := store.RoundTTL(ttl).Milliseconds()
	args := []any{[]byte(key), old, new, ms}
	if v.s.q.base == &mysql {
		args = []any{new, ms * 1000, []byte(key), old}
	}
	var n int64
	err := v.retry(ctx, "compare-and-swap", key, func() (bool, error) {
		var err error
		n, err = v.c.Exec(ctx, v.s.q.cas, args...)
		return true, err
	})
	return err == nil && n == 1, err
}

// CompareAndDelete implements store.Store: one conditional DELETE.
func (v *View) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := store.CheckDelete(key, old); err != nil {
		return false, err
	}
	if err := v.check("compare-and-delete", key); err != nil {
		return false, err
	}
	var n int64
	err := v.retry(ctx, "compare-and-delete", key, func() (bool, error) {
		var err error
		n, err = v.c.Exec(ctx, v.s.q.cad, []byte(key), old)
		return true, err
	})
	return err == nil && n == 1, err
}

// Consume implements store.Store: one DELETE ... RETURNING, or on MySQL
// without it, a read of the row's revision and a DELETE of exactly that
// revision.
func (v *View) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	if err := v.check("consume", key); err != nil {
		return nil, err
	}
	var val []byte
	var found bool
	err := v.retry(ctx, "consume", key, func() (bool, error) {
		var err error
		val, found, err = v.consumeOnce(ctx, []byte(key))
		return err == nil, err
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("sqlstore: consume %s: %w", keyRef(key), store.ErrNotFound)
	}
	if val == nil {
		val = []byte{}
	}
	return val, nil
}

// consumeOnce makes one attempt at Consume. It returns an error of type
// errRetry when the row changed between its two statements.
func (v *View) consumeOnce(ctx context.Context, key []byte) (val []byte, found bool, err error) {
	q := v.s.q
	if q.base == &mysql {
		ret, err := v.s.mysqlReturning(ctx, v.c)
		if err != nil {
			return nil, false, err
		}
		if !ret {
			return v.consumeByRev(ctx, key)
		}
	}
	found, err = queryOne(ctx, v.c, q.consume, []any{key}, &val)
	return val, found, err
}

// consumeByRev reads the row and its revision, then deletes that revision.
func (v *View) consumeByRev(ctx context.Context, key []byte) (val []byte, found bool, err error) {
	q := v.s.q
	read := q.consumeRead
	if !v.own {
		read = q.consumeLock
	}
	var rev int64
	found, err = queryOne(ctx, v.c, read, []any{key}, &val, &rev)
	if err != nil || !found {
		return nil, false, err
	}
	n, err := v.c.Exec(ctx, q.consumeRev, key, rev)
	switch {
	case err != nil:
		return nil, false, err
	case n == 0:
		return nil, false, errRetry
	}
	return val, true, nil
}

// errRetry tells retry to make another attempt; it is never returned.
var errRetry error = retrySignal{}

type retrySignal struct{}

func (retrySignal) Error() string { return "sqlstore: the row changed between two statements" }

// queryOne runs query and scans its only row into dest, reporting whether
// there was one. It reads the result to its end, so that errors the
// server reports after the row (a failed commit of a data-modifying
// statement) are seen. A Scan failure is returned as a scanError.
func queryOne(ctx context.Context, c Conn, query string, args []any, dest ...any) (found bool, err error) {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if rows.Next() {
		found = true
		if err := rows.Scan(dest...); err != nil {
			return false, scanError{err}
		}
		for rows.Next() {
		}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	return found, rows.Close()
}

// scanError marks a row that could not be decoded.
type scanError struct{ err error }

func (e scanError) Error() string { return "decoding row: " + e.err.Error() }
func (e scanError) Unwrap() error { return e.err }

func isScan(err error) bool {
	_, ok := err.(scanError)
	return ok
}
