package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// TestExistingTTLNotAboveWritten: the remaining TTL a SetNX or SetNXBatch
// reports for an existing entry is never above the TTL the entry was
// written with. Here the claim waits on the row, held by a transaction
// that then rewrites the entry with a one-hour TTL (as a CompareAndSwap in
// a business transaction does) and commits: the claim's statement began
// before that write, and a clock read at the statement's start makes the
// entry look as if it had more than an hour left. internal/linear saw this
// on MariaDB (SetNXBatch reporting 1h0m0.001s for a one-hour entry).
// PostgreSQL's claims do not wait on a live row (they read the committed
// version), so only MySQL's are checked.
func TestExistingTTLNotAboveWritten(t *testing.T) {
	for _, b := range []*backend{my} {
		for _, op := range []string{"SetNX", "SetNXBatch"} {
			t.Run(b.name+"/"+op, func(t *testing.T) {
				ctx := t.Context()
				s := newStore(t, b)
				const key = "k"
				if set, _, err := s.SetNX(ctx, key, []byte("a"), time.Hour); err != nil || !set {
					t.Fatalf("SetNX: %v, %v", set, err)
				}
				tx, err := b.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				const ph, clock = "?", "UTC_TIMESTAMP(6) + INTERVAL 3600000000 MICROSECOND"
				table := s.Table()
				if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT idem_key FROM %s WHERE idem_key = %s FOR UPDATE", table, ph), []byte(key)); err != nil {
					t.Fatal(err)
				}
				dup := make(chan result, 1)
				go func() {
					var r result
					if op == "SetNX" {
						r.set, r.e, r.err = s.SetNX(context.Background(), key, []byte("b"), time.Hour)
					} else {
						var res []store.BatchResult
						res, r.err = s.SetNXBatch(context.Background(), []store.BatchItem{{Key: key, Value: []byte("b"), TTL: time.Hour}})
						if r.err == nil {
							r.set, r.e = res[0].Set, res[0].Existing
						}
					}
					dup <- r
				}()
				if r, early := waitForLockWait(t, b, dup); early {
					t.Fatalf("the claim did not wait on the row: %+v", r)
				}
				// Let the claim's statement clock fall behind by more
				// than the millisecond the TTL is reported in.
				waitUntil := time.Now().Add(20 * time.Millisecond)
				for time.Now().Before(waitUntil) {
					time.Sleep(time.Millisecond)
				}
				if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET expires_at = %s WHERE idem_key = %s", table, clock, ph), []byte(key)); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				r := <-dup
				if r.err != nil || r.set {
					t.Fatalf("%s: set %v, err %v; want the existing entry", op, r.set, r.err)
				}
				if r.e.TTL > time.Hour {
					t.Errorf("%s reports %v left on an entry written with a TTL of 1h", op, r.e.TTL)
				}
			})
		}
	}
}
