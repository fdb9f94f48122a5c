package sqlstore

import (
	"context"
	"database/sql"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/idemkit/idemkit/store"
)

// SetNXBatch implements store.Batcher: it claims the batch's distinct keys,
// each as SetNX would, in ascending order so that overlapping batches never
// wait on each other in a cycle, with as few statements as the server
// allows: one for the whole batch on PostgreSQL, one per 512 keys on
// MariaDB 10.5 or later. A batch is not atomic as a whole: every key is.
// On the Store's own pool a statement that the server picks as a deadlock
// victim runs again; in a caller's transaction the error is returned,
// since the server rolled the transaction back. See the package
// documentation, section "Batches", for the statements per server.
func (v *View) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	if err := v.check("setnx-batch", ""); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return []store.BatchResult{}, nil
	}
	// Each key is claimed by its first occurrence, in key order.
	first := map[string]int{}
	var order []int
	for i, it := range items {
		if _, dup := first[it.Key]; !dup {
			first[it.Key] = i
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(items[a].Key, items[b].Key) })

	res := make([]store.BatchResult, len(items))
	chunk := len(order)
	if v.s.q.base == &mysql {
		chunk = myBatchMax
	}
	for start := 0; start < len(order); start += chunk {
		if err := v.claimBatch(ctx, items, order[start:min(start+chunk, len(order))], res); err != nil {
			return nil, err
		}
	}
	for i, it := range items {
		f := first[it.Key]
		if f == i {
			continue
		}
		if res[f].Set {
			res[i].Existing = store.Entry{Value: slices.Clone(items[f].Value), TTL: store.RoundTTL(items[f].TTL)}
		} else {
			res[i].Existing = store.Entry{Value: slices.Clone(res[f].Existing.Value), TTL: res[f].Existing.TTL}
		}
	}
	return res, nil
}

// claimBatch claims the items at pending, distinct keys in ascending
// order, and records their outcomes in res. It runs its statements again
// for the keys they left unresolved, and, on the Store's own pool, after a
// deadlock.
func (v *View) claimBatch(ctx context.Context, items []store.BatchItem, pending []int, res []store.BatchResult) error {
	for range maxAttempts {
		var left []int
		var err error
		if v.s.q.base == &postgres {
			left, err = v.pgBatch(ctx, items, pending, res)
		} else {
			left, err = v.myBatch(ctx, items, pending, res)
		}
		switch {
		case err == nil && len(left) == 0:
			return nil
		case err == nil:
			pending = left
		case isScan(err):
			return corrupt("setnx-batch", "", err)
		case v.own && retryable(err) && ctx.Err() == nil:
		default:
			return v.wrap(ctx, "setnx-batch", "", err)
		}
	}
	return wrap(ctx, "setnx-batch", "", errContended)
}

// batchRow is one row of a batch statement's result.
type batchRow struct {
	set bool
	e   store.Entry
}

// collect reads the rows of a batch statement, each a key and its
// outcome, into res, and returns the items of pending it named no
// outcome for.
func collect(rows Rows, items []store.BatchItem, pending []int, res []store.BatchResult, scan func(Rows) (key []byte, r batchRow, ok bool, err error)) ([]int, error) {
	defer rows.Close()
	at := make(map[string]int, len(pending))
	for j, i := range pending {
		at[items[i].Key] = j
	}
	got := make([]*batchRow, len(pending))
	for rows.Next() {
		k, r, ok, err := scan(rows)
		if err != nil {
			return nil, scanError{err}
		}
		if j, known := at[string(k)]; known && ok && got[j] == nil {
			got[j] = &r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var left []int
	for j, i := range pending {
		if got[j] == nil {
			left = append(left, i)
			continue
		}
		res[i] = store.BatchResult{Set: got[j].set, Existing: got[j].e}
	}
	return left, nil
}

// pgBatch runs PostgreSQL's one-statement batch claim (see pgSetNXBatch).
func (v *View) pgBatch(ctx context.Context, items []store.BatchItem, pending []int, res []store.BatchResult) ([]int, error) {
	keys, vals, ms := make([][]byte, len(pending)), make([][]byte, len(pending)), make([]int64, len(pending))
	for j, i := range pending {
		keys[j], vals[j], ms[j] = []byte(items[i].Key), items[i].Value, store.RoundTTL(items[i].TTL).Milliseconds()
	}
	query := v.s.q.setnxBatch
	if v.async {
		query = v.s.q.setnxBatchAsync
	}
	rows, err := v.c.Query(ctx, query, keys, vals, ms)
	if err != nil {
		return nil, err
	}
	return collect(rows, items, pending, res, func(rows Rows) ([]byte, batchRow, bool, error) {
		var k, val []byte
		var set bool
		var ttl int64
		if err := rows.Scan(&k, &set, &val, &ttl); err != nil {
			return nil, batchRow{}, false, err
		}
		if set {
			return k, batchRow{set: true}, true, nil
		}
		return k, batchRow{e: entry(val, ttl)}, true, nil
	})
}

// myBatch claims up to myBatchMax keys on MySQL: one INSERT ... ON
// DUPLICATE KEY UPDATE ... RETURNING where the server has it, otherwise
// the INSERT and a read of the keys, in a transaction. On the Store's own
// pool the transaction has the server's default isolation level (naming
// one costs a round trip of its own) and the read is a plain one, the
// transaction's first consistent read: its snapshot, taken after the
// INSERT locked every row of the batch, holds the latest versions of those
// rows (a locking read there, under READ COMMITTED, measured a deadlock in
// most overlapping batches). In a caller's transaction, whose snapshot may
// be older, the read is a locking one, LOCK IN SHARE MODE (the INSERT
// already holds each row exclusively, so it waits on nothing). Every row
// the INSERT writes gets the same fresh random revision (see myUpsert):
// the call set exactly the keys whose row it then reads with that
// revision. The statement text has a row count that is a power of two
// (batchQueries); the last item fills the rows beyond len(pending), a
// duplicate that finds the row the statement just wrote, live, and leaves
// it alone.
func (v *View) myBatch(ctx context.Context, items []store.BatchItem, pending []int, res []store.BatchResult) ([]int, error) {
	ret, err := v.s.mysqlReturning(ctx, v.c)
	if err != nil {
		return nil, err
	}
	n := 1 << bits.Len(uint(len(pending)-1))
	qs := v.s.q.batchQueries(n)
	rev := rand.Int64N(maxRev-minRev) + minRev
	args, keys := make([]any, 0, 4*n), make([]any, 0, n)
	for j := range n {
		it := items[pending[min(j, len(pending)-1)]]
		k, value := []byte(it.Key), it.Value
		if j >= len(pending) {
			// A padding row repeats the last key, which its first row has
			// just made live, so it never writes: it needs no value.
			value = []byte{}
		}
		args = append(args, k, value, store.RoundTTL(it.TTL).Milliseconds()*1000, rev)
		keys = append(keys, k)
	}
	scan := func(rows Rows) ([]byte, batchRow, bool, error) {
		var k, val []byte
		var got, ttl int64
		if err := rows.Scan(&k, &got, &val, &ttl); err != nil {
			return nil, batchRow{}, false, err
		}
		switch {
		case got == rev:
			return k, batchRow{set: true}, true, nil
		case ttl <= 0: // expired since the INSERT: claim it again
			return k, batchRow{}, false, nil
		}
		return k, batchRow{e: entry(val, ttl)}, true, nil
	}
	if ret {
		rows, err := v.c.Query(ctx, qs.upsert, args...)
		if err != nil {
			return nil, err
		}
		return collect(rows, items, pending, res, scan)
	}
	c, read := v.c, qs.readShared
	var tx *sql.Tx
	if v.own {
		if tx, err = v.s.db.BeginTx(ctx, nil); err != nil {
			return nil, err
		}
		defer tx.Rollback()
		c, read = querierConn{q: tx, stmts: v.s.txStmts()}, qs.read
	}
	if _, err := c.Exec(ctx, qs.insert, args...); err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, read, keys...)
	if err != nil {
		return nil, err
	}
	left, err := collect(rows, items, pending, res, scan)
	if err != nil {
		return nil, err
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	return left, nil
}
