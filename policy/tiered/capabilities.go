package tiered

import (
	"context"
	"errors"

	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
)

// caps are the optional interfaces a tiered store over primary offers: its
// primary's Ping, SetNXValue, SetNXBatch and Scan, and always Close, which
// stops the copy-forward goroutine it owns.
func caps(primary store.Store) storewrap.Caps {
	return storewrap.Closer | storewrap.Of(primary)&^storewrap.Closer
}

// wrap gives t the optional interfaces caps names.
func (t *tieredStore) wrap() store.Store {
	return storewrap.Build(t, caps(t.primary), storewrap.Methods{
		Close:      t.Close,
		Ping:       t.Ping,
		SetNXValue: t.SetNXValue,
		SetNXBatch: t.setNXBatch,
		Scan:       t.scan,
	})
}

// setNXBatch implements store.Batcher, offered when the primary is one.
// While operations go straight to the primary, the batch is the primary's
// (one call); otherwise each item is a SetNX of this store, routed and
// journaled as SetNX is.
func (t *tieredStore) setNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	if t.fast() {
		res, err := t.primary.(store.Batcher).SetNXBatch(ctx, items)
		t.lostOnFastPath(ctx, err)
		return res, err
	}
	res := make([]store.BatchResult, len(items))
	for i, it := range items {
		set, e, err := t.SetNX(ctx, it.Key, it.Value, it.TTL)
		if err != nil {
			return nil, err
		}
		res[i] = store.BatchResult{Set: set, Existing: e}
	}
	return res, nil
}

// scan implements store.Scanner, offered when the primary is one: it lists
// the primary's keys, then the keys the fallback holds for the primary
// that the primary did not list. It fails when the primary does.
func (t *tieredStore) scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	listed := make(map[string]bool)
	stopped := false
	err := t.primary.(store.Scanner).Scan(ctx, prefix, func(key string, ent store.Entry) bool {
		if t.journal.holds(key) {
			listed[key] = true
		}
		if !fn(key, ent) {
			stopped = true
		}
		return !stopped
	})
	if err != nil || stopped {
		return err
	}
	for _, key := range t.journal.held(prefix) {
		if listed[key] {
			continue
		}
		e, err := t.fallback.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return err
		}
		if !fn(key, e) {
			return nil
		}
	}
	return nil
}
