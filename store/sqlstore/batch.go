package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/idemkit/idemkit/store"
)

// SetNXBatch implements store.Batcher: it claims every item in one
// READ COMMITTED transaction (the caller's, for a View), in key order so
// that overlapping batches never wait on each other in a cycle. A batch
// on the Store's own pool that the server picks as a deadlock victim runs
// again from the start.
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

	var res []store.BatchResult
	var err error
	for range maxAttempts {
		res, err = v.batchOnce(ctx, items, order)
		if err == nil || !v.own || !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
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

// batchOnce claims the items at order, on the Store's own pool in a
// transaction of its own, or in the View's.
func (v *View) batchOnce(ctx context.Context, items []store.BatchItem, order []int) ([]store.BatchResult, error) {
	res := make([]store.BatchResult, len(items))
	tv := v
	var tx *sql.Tx
	if v.own {
		var err error
		if tx, err = v.s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err != nil {
			return nil, wrap(ctx, "setnx-batch", "", err)
		}
		defer tx.Rollback()
		tv = &View{s: v.s, c: querierConn{q: tx, stmts: v.s.txStmts()}, async: v.async}
	}
	for _, i := range order {
		it := items[i]
		var err error
		if res[i].Set, res[i].Existing, err = tv.SetNX(ctx, it.Key, it.Value, it.TTL); err != nil {
			return nil, err
		}
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return nil, wrap(ctx, "setnx-batch", "", err)
		}
	}
	return res, nil
}
