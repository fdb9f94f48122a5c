package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// SetNXBatch claims every item as SetNX would, in input order, in one
// transaction and one flush, and returns one result per item. A key that
// appears again in the batch sees its earlier occurrence. An invalid item
// fails the call with store.ErrInvalid and nothing is written; an item
// that cannot be claimed (a corrupt entry) fails it and undoes the rest.
func (s *Store) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	const name = "boltstore: setnx batch"
	if len(items) == 0 {
		return []store.BatchResult{}, nil
	}
	claims, err := prepareBatch(items)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	results := make([]store.BatchResult, len(items))
	err = s.submit(ctx, name, "", func(b *bolt.Bucket, now time.Time) (bool, error) {
		return applyBatch(b, now, claims, results)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// claim is a validated batch item, its value already encoded.
type claim struct {
	key    []byte
	stored []byte
	ttl    time.Duration
}

// prepareBatch validates items and encodes their values, copying them.
func prepareBatch(items []store.BatchItem) ([]claim, error) {
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	claims := make([]claim, len(items))
	for i, it := range items {
		claims[i] = claim{key: []byte(it.Key), stored: encode(it.Value, 0), ttl: store.RoundTTL(it.TTL)}
	}
	return claims, nil
}

// applyBatch claims each of claims in b at now, filling results. On an
// error it undoes every put it made, so that it leaves no change behind;
// should the undo fail, it makes the committer roll the transaction back.
func applyBatch(b *bolt.Bucket, now time.Time, claims []claim, results []store.BatchResult) (bool, error) {
	var undo []prior
	for i, c := range claims {
		set, existing, p, err := claimOne(b, now, c)
		if err != nil {
			if uerr := rollback(b, undo); uerr != nil {
				return false, fmt.Errorf("item %d: %w; %w: %w", i, err, errRollback, uerr)
			}
			return false, fmt.Errorf("item %d: %w", i, err)
		}
		if set {
			undo = append(undo, p)
		}
		results[i] = store.BatchResult{Set: set, Existing: existing}
	}
	return len(undo) > 0, nil
}

// claimOne is SetNX of c inside the batch's transaction. When it sets
// the key it returns what the key held before, for an undo.
func claimOne(b *bolt.Bucket, now time.Time, c claim) (set bool, existing store.Entry, p prior, err error) {
	r, ok, err := lookup(b, c.key, now)
	if err != nil {
		return false, store.Entry{}, prior{}, err
	}
	if ok {
		return false, r.entry(now), prior{}, nil
	}
	p = prior{key: c.key}
	if raw := b.Get(c.key); raw != nil { // an expired entry
		p.raw = clone(raw)
	}
	if err := b.Put(c.key, stamp(c.stored, expiryMs(now, c.ttl))); err != nil {
		return false, store.Entry{}, prior{}, fmt.Errorf("%s: %w", keyRef(c.key), err)
	}
	return true, store.Entry{}, p, nil
}

// prior is what a key held before a batch put to it: raw is nil when
// the key was absent.
type prior struct {
	key, raw []byte
}

// rollback restores what undo records, latest first.
func rollback(b *bolt.Bucket, undo []prior) error {
	for i := len(undo) - 1; i >= 0; i-- {
		p := undo[i]
		var err error
		if p.raw == nil {
			err = b.Delete(p.key)
		} else {
			err = b.Put(p.key, p.raw)
		}
		if err != nil {
			return fmt.Errorf("undo %s: %w", keyRef(p.key), err)
		}
	}
	return nil
}
