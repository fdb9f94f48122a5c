package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// lookup returns the live record under key, or ok == false when key is
// absent or expired. It fails with store.ErrCorrupt when the stored value
// does not decode.
func lookup(b *bolt.Bucket, key []byte, now time.Time) (r record, ok bool, err error) {
	raw := b.Get(key)
	if raw == nil {
		return record{}, false, nil
	}
	r, err = decode(key, raw)
	if err != nil {
		return record{}, false, err
	}
	return r, r.left(now) > 0, nil
}

// SetNX stores value under key for ttl (rounded up to whole milliseconds)
// if key is absent or expired, and reports whether it did; otherwise it
// returns the existing value and remaining TTL, read in the same
// transaction. It is safe for concurrent use: of many callers racing on
// one key exactly one sets it.
func (s *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := store.CheckSet(key, value, ttl); err != nil {
		return false, store.Entry{}, fmt.Errorf("boltstore: setnx: %w", err)
	}
	k, stored := []byte(key), encode(value, 0)
	ttl = store.RoundTTL(ttl)
	var set bool
	var existing store.Entry
	err := s.submit(ctx, "boltstore: setnx", key, func(b *bolt.Bucket, now time.Time) (bool, error) {
		r, ok, err := lookup(b, k, now)
		if err != nil {
			return false, err
		}
		if ok {
			existing = r.entry(now)
			return false, nil
		}
		if err := b.Put(k, stamp(stored, expiryMs(now, ttl))); err != nil {
			return false, fmt.Errorf("boltstore: setnx: %s: %w", keyRef(key), err)
		}
		set = true
		return true, nil
	})
	if err != nil {
		return false, store.Entry{}, err
	}
	return set, existing, nil
}

// Get returns the value under key and its remaining TTL, or an error
// wrapping store.ErrNotFound when key is absent or expired. It runs in a
// read-only transaction, concurrently with writers.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("boltstore: get: %w", err)
	}
	var e store.Entry
	err := s.view(ctx, "boltstore: get", key, func(b *bolt.Bucket, now time.Time) error {
		r, ok, err := lookup(b, []byte(key), now)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("boltstore: get: %s: %w", keyRef(key), store.ErrNotFound)
		}
		e = r.entry(now)
		return nil
	})
	if err != nil {
		return store.Entry{}, err
	}
	return e, nil
}

// CompareAndSwap replaces the value under key with new and its TTL with
// ttl (rounded up to whole milliseconds) only if the live value equals
// old byte for byte, and reports whether it did. An absent or expired key
// reports false and no error.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := store.CheckSwap(key, old, new, ttl); err != nil {
		return false, fmt.Errorf("boltstore: cas: %w", err)
	}
	k, want, stored := []byte(key), clone(old), encode(new, 0)
	ttl = store.RoundTTL(ttl)
	var swapped bool
	err := s.submit(ctx, "boltstore: cas", key, func(b *bolt.Bucket, now time.Time) (bool, error) {
		r, ok, err := lookup(b, k, now)
		if err != nil || !ok || !bytes.Equal(r.value, want) {
			return false, err
		}
		if err := b.Put(k, stamp(stored, expiryMs(now, ttl))); err != nil {
			return false, fmt.Errorf("boltstore: cas: %s: %w", keyRef(key), err)
		}
		swapped = true
		return true, nil
	})
	if err != nil {
		return false, err
	}
	return swapped, nil
}

// CompareAndDelete deletes key only if its live value equals old byte for
// byte, and reports whether it did. An absent or expired key reports false
// and no error.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := store.CheckDelete(key, old); err != nil {
		return false, fmt.Errorf("boltstore: cad: %w", err)
	}
	k, want := []byte(key), clone(old)
	var deleted bool
	err := s.submit(ctx, "boltstore: cad", key, func(b *bolt.Bucket, now time.Time) (bool, error) {
		r, ok, err := lookup(b, k, now)
		if err != nil || !ok || !bytes.Equal(r.value, want) {
			return false, err
		}
		if err := b.Delete(k); err != nil {
			return false, fmt.Errorf("boltstore: cad: %s: %w", keyRef(key), err)
		}
		deleted = true
		return true, nil
	})
	if err != nil {
		return false, err
	}
	return deleted, nil
}

// Consume deletes key and returns the value it held, in one transaction,
// or an error wrapping store.ErrNotFound when key is absent or expired.
// Of many concurrent callers at most one receives the value.
func (s *Store) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, fmt.Errorf("boltstore: consume: %w", err)
	}
	k := []byte(key)
	var value []byte
	err := s.submit(ctx, "boltstore: consume", key, func(b *bolt.Bucket, now time.Time) (bool, error) {
		r, ok, err := lookup(b, k, now)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("boltstore: consume: %s: %w", keyRef(key), store.ErrNotFound)
		}
		got := clone(r.value)
		if err := b.Delete(k); err != nil {
			return false, fmt.Errorf("boltstore: consume: %s: %w", keyRef(key), err)
		}
		value = got
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return value, nil
}
