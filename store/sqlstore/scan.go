package sqlstore

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit/store"
)

// scanPage is how many rows one Scan statement reads.
const scanPage = 500

// Scan implements store.Scanner for operator tools: it reads the live
// keys under prefix in key order, a page of rows per statement, and calls
// fn for each row of a page after the page's statement ended, so fn may
// use the store.
func (v *View) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	if len(prefix) > store.MaxKeyLen {
		return fmt.Errorf("%w: prefix of %d bytes exceeds the %d-byte key limit", store.ErrInvalid, len(prefix), store.MaxKeyLen)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil scan function", store.ErrInvalid)
	}
	if err := v.check("scan", ""); err != nil {
		return err
	}
	from, end := []byte(prefix), prefixEnd([]byte(prefix))
	for {
		keys, ents, err := v.scanPage(ctx, from, end)
		if err != nil {
			return v.wrap(ctx, "scan", "", err)
		}
		for i, k := range keys {
			if !fn(k, ents[i]) {
				return nil
			}
		}
		if len(keys) < scanPage {
			return nil
		}
		from = append([]byte(keys[len(keys)-1]), 0) // the next key in byte order
	}
}

// scanPage reads the live rows with keys in [from, end), end nil for no
// bound, at most scanPage of them.
func (v *View) scanPage(ctx context.Context, from, end []byte) ([]string, []store.Entry, error) {
	q := v.s.q
	query, args := q.scan, []any{from}
	if end != nil {
		query, args = q.scanBounded, []any{from, end}
	}
	rows, err := v.c.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var keys []string
	var ents []store.Entry
	for rows.Next() {
		var k, val []byte
		var ttl int64
		if err := rows.Scan(&k, &val, &ttl); err != nil {
			return nil, nil, err
		}
		keys, ents = append(keys, string(k)), append(ents, entry(val, ttl))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return keys, ents, rows.Close()
}

// prefixEnd returns the smallest key greater than every key that starts
// with prefix, or nil when there is none (an empty prefix, or one of 0xff
// bytes only).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Scan implements store.Scanner; see View.Scan.
func (s *Store) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	return s.view.Scan(ctx, prefix, fn)
}
