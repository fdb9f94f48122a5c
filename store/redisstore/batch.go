package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

const opSetNXBatch = "setnx batch"

// SetNXBatch claims every item as SetNX would, in one pipelined round trip
// (on a Cluster, one pipeline per node, sent concurrently). On Redis 7.0
// and later, outside a Cluster, the items are SET NX GET and PTTL pairs in
// one MULTI/EXEC; otherwise each item is the SetNX script, atomic on its
// key. Either way the
// server runs them in order, so a key named twice is set by its first
// occurrence.
// With WithWaitReplicas the items are claimed one by one, each confirmed
// by WAIT. A transport failure fails the whole call with ErrUnavailable:
// any item may have been applied. It implements store.Batcher.
func (s *Store) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	if err := checkCtx(ctx, opSetNXBatch); err != nil {
		return nil, err
	}
	out := make([]store.BatchResult, len(items))
	if len(items) == 0 {
		return out, nil
	}
	if s.waitN > 0 {
		for i, it := range items {
			set, e, err := s.SetNX(ctx, it.Key, it.Value, it.TTL)
			if err != nil {
				return nil, err
			}
			out[i] = store.BatchResult{Set: set, Existing: e}
		}
		return out, nil
	}
	d, err := s.dialect(ctx)
	if err != nil {
		return nil, s.fail(ctx, opSetNXBatch, "", err)
	}
	// One transaction may not span Cluster slots (CROSSSLOT): on a Cluster
	// each item is a script instead.
	if _, cluster := s.client.(*redis.ClusterClient); d.setGetNX && !cluster {
		if out, err := s.batchTx(ctx, items); !errors.Is(err, errRefused) {
			return out, err
		}
	}
	cmds, err := s.pipeSetNX(ctx, items, nil)
	if err != nil {
		return nil, err
	}
	if missing := noScript(cmds); len(missing) > 0 {
		// A node that lost its script cache ran none of the EVALSHAs it
		// refused; send those items again with the script itself. The
		// others ran: keep them. Each key's first occurrence was sent in
		// full, so it ran first.
		again, err := s.pipeSetNX(ctx, items, missing)
		if err != nil {
			return nil, err
		}
		for _, i := range missing {
			cmds[i] = again[i]
		}
	}
	for i, cmd := range cmds {
		rk := s.key(items[i].Key)
		reply, err := cmd.Result()
		if err != nil {
			return nil, s.fail(ctx, opSetNXBatch, rk, err)
		}
		if n, ok := reply.(int64); ok && n == 1 {
			out[i].Set = true
			continue
		}
		if out[i].Existing, err = decodeEntry(opSetNXBatch, rk, reply); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// batchTx claims every item with SET NX PX GET and PTTL, all in one
// MULTI/EXEC: no Lua.
// A refused transaction, which ran nothing, returns errRefused.
func (s *Store) batchTx(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	p := s.client.TxPipeline()
	prev := make([]*redis.Cmd, len(items))
	pttl := make([]*redis.Cmd, len(items))
	for i, it := range items {
		rk := s.key(it.Key)
		prev[i] = p.Do(ctx, "set", rk, it.Value, "nx", "px", millis(it.TTL), "get")
		pttl[i] = p.Do(ctx, "pttl", rk)
	}
	if _, err := p.Exec(ctx); err != nil && (ctxDone(ctx) != nil || isUnavailable(err)) {
		return nil, s.fail(ctx, opSetNXBatch, "", err)
	}
	out := make([]store.BatchResult, len(items))
	for i, it := range items {
		rk := s.key(it.Key)
		v, err := prev[i].Text()
		switch {
		case errors.Is(err, redis.Nil):
			out[i].Set = true
			continue
		case s.refused(err) || s.refused(pttl[i].Err()):
			return nil, errRefused
		case err != nil:
			return nil, s.fail(ctx, opSetNXBatch, rk, err)
		}
		if out[i].Existing, err = s.decodeTx(ctx, opSetNXBatch, rk, v, pttl[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pipeSetNX sends the SetNX script in one pipeline: by digest for every
// item (but the first occurrence of a key named twice) when only is nil,
// else in full for the items at the indexes in only.
func (s *Store) pipeSetNX(ctx context.Context, items []store.BatchItem, only []int) ([]*redis.Cmd, error) {
	p := s.client.Pipeline()
	cmds := make([]*redis.Cmd, len(items))
	send := func(i int, eval bool) {
		keys, args := []string{s.key(items[i].Key)}, []any{items[i].Value, millis(items[i].TTL)}
		if eval {
			cmds[i] = setNXScript.Eval(ctx, p, keys, args...)
		} else {
			cmds[i] = setNXScript.EvalSha(ctx, p, keys, args...)
		}
	}
	if only == nil {
		// The first occurrence of a key named again goes in full: were it
		// refused (NOSCRIPT) while a later one ran, the script having been
		// cached meanwhile by another client, the later one would claim the
		// key. Later occurrences only read it, in any order.
		seen := make(map[string]int, len(items))
		for _, it := range items {
			seen[it.Key]++
		}
		for i, it := range items {
			n := seen[it.Key]
			seen[it.Key] = 0
			send(i, n > 1)
		}
	}
	for _, i := range only {
		send(i, true)
	}
	if _, err := p.Exec(ctx); err != nil && (ctxDone(ctx) != nil || isUnavailable(err)) {
		return nil, s.fail(ctx, opSetNXBatch, "", err)
	}
	return cmds, nil
}

// noScript returns the indexes of the pipelined EVALSHAs that found their
// script missing.
func noScript(cmds []*redis.Cmd) []int {
	var missing []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	return missing
}

var _ store.Batcher = (*Store)(nil)
