package boltstore

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// scanPage is how many entries Scan reads per read-only transaction, so fn
// never runs inside one (it may call the store).
const scanPage = 256

// Scan calls fn with each live key that starts with prefix, in key order,
// and its entry, until fn returns false. It reads pages of entries in
// read-only transactions and calls fn between them, so fn may use the
// store. It implements store.Scanner.
func (s *Store) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	after := []byte(nil)
	for {
		keys, ents, err := s.scanPage(ctx, []byte(prefix), after)
		if err != nil {
			return err
		}
		for i, k := range keys {
			if !fn(k, ents[i]) {
				return nil
			}
		}
		if len(keys) < scanPage {
			return nil
		}
		after = []byte(keys[len(keys)-1])
	}
}

// scanPage reads up to scanPage live entries under prefix, after the key
// after (nil: from the start).
func (s *Store) scanPage(ctx context.Context, prefix, after []byte) (keys []string, ents []store.Entry, err error) {
	err = s.view(ctx, "boltstore: scan", "", func(b *bolt.Bucket, now time.Time) error {
		c := b.Cursor()
		k, v := c.Seek(prefix)
		if after != nil {
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(keys) < scanPage; k, v = c.Next() {
			r, err := decode(k, v)
			if err != nil {
				return err
			}
			if r.left(now) <= 0 {
				continue
			}
			keys = append(keys, string(k))
			ents = append(ents, r.entry(now))
		}
		return nil
	})
	return keys, ents, err
}

var _ store.Scanner = (*Store)(nil)
