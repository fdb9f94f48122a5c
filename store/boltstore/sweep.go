package boltstore

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// scanFactor bounds how many entries one read transaction of a sweep
// looks at, as a multiple of the sweep batch, so that a bucket full of
// live entries does not hold a read transaction open for long (bbolt
// cannot grow its memory map while one is open).
const scanFactor = 4

// Sweep deletes every expired entry and reports how many it deleted, in
// write transactions of at most the sweep batch each (see "Expiry and
// the clock"). Entries that do not decode are left alone.
func (s *Store) Sweep(ctx context.Context) (removed int, err error) {
	var after []byte
	for {
		keys, last, err := s.scanExpired(ctx, after)
		if err != nil {
			return removed, err
		}
		if len(keys) > 0 {
			n, err := s.deleteExpired(ctx, keys)
			removed += n
			if err != nil {
				return removed, err
			}
		}
		if last == nil {
			return removed, nil
		}
		after = last
	}
}

// scanExpired returns up to a sweep batch of expired keys found after the
// key after (from the start when nil), and the last key it looked at, or
// nil when it reached the end of the bucket.
func (s *Store) scanExpired(ctx context.Context, after []byte) (keys [][]byte, last []byte, err error) {
	batch := s.cfg.sweepBatch
	err = s.view(ctx, "boltstore: sweep", "", func(b *bolt.Bucket, now time.Time) error {
		c := b.Cursor()
		k, v := seekAfter(c, after)
		for scanned := 0; k != nil; k, v = c.Next() {
			if expired(k, v, now) {
				keys = append(keys, clone(k))
			}
			scanned++
			if len(keys) == batch || scanned == scanFactor*batch {
				last = clone(k)
				return nil
			}
		}
		return nil
	})
	return keys, last, err
}

// seekAfter positions c on the first key after after, or on the first key
// when after is nil.
func seekAfter(c *bolt.Cursor, after []byte) (k, v []byte) {
	if after == nil {
		return c.First()
	}
	k, v = c.Seek(after)
	if k != nil && bytes.Equal(k, after) {
		return c.Next()
	}
	return k, v
}

// expired reports whether the stored value v under k decodes and has
// expired at now. Nested buckets (v == nil) and undecodable values are not.
func expired(k, v []byte, now time.Time) bool {
	if v == nil {
		return false
	}
	r, err := decode(k, v)
	return err == nil && r.left(now) == 0
}

// deleteExpired deletes, in one committer transaction, those of keys that
// are still expired, and reports how many it deleted.
func (s *Store) deleteExpired(ctx context.Context, keys [][]byte) (int, error) {
	n := 0
	err := s.submit(ctx, "boltstore: sweep", "", func(b *bolt.Bucket, now time.Time) (bool, error) {
		for _, k := range keys {
			if expired(k, b.Get(k), now) && b.Delete(k) == nil {
				n++
			}
		}
		return n > 0, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// sweepLoop is the background sweeper: it sweeps every interval until ctx
// (cancelled by Close) ends. Its errors are dropped; the next tick tries
// again.
func (s *Store) sweepLoop(ctx context.Context, interval time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.Sweep(ctx)
		}
	}
}
