package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// TestReclaimRaceOneWinner races goroutines claiming one key that holds
// an expired entry, each with SetNX or a one-item SetNXBatch, on the
// Store's own pool and in transactions of their own (database/sql at the
// default isolation and at REPEATABLE READ, and native pgx): of the claims
// that commit exactly one sets the key, every other committed claim saw
// the winner's value, and the key ends holding it. A claim in a
// transaction may instead fail as a serialization or deadlock victim
// (an error wrapping store.ErrUnavailable), and then rolls back.
func TestReclaimRaceOneWinner(t *testing.T) {
	const racers, rounds = 16, 8
	type claimer func(ctx context.Context, s *sqlstore.Store, key string, value []byte, batch bool) (set bool, seen []byte, err error)
	claim := func(ctx context.Context, v store.Store, key string, value []byte, batch bool) (bool, []byte, error) {
		if !batch {
			set, e, err := v.SetNX(ctx, key, value, time.Hour)
			return set, e.Value, err
		}
		res, err := v.(store.Batcher).SetNXBatch(ctx, []store.BatchItem{{Key: key, Value: value, TTL: time.Hour}, {Key: key, Value: []byte("dup"), TTL: time.Hour}})
		if err != nil {
			return false, nil, err
		}
		if res[1].Set {
			return false, nil, errors.New("the duplicate of the batch's key set it too")
		}
		if res[0].Set {
			if string(res[1].Existing.Value) != string(value) {
				return false, nil, fmt.Errorf("the duplicate saw %q, want %q", res[1].Existing.Value, value)
			}
			return true, nil, nil
		}
		return false, res[0].Existing.Value, nil
	}
	sqlTx := func(b *backend, iso sql.IsolationLevel) claimer {
		return func(ctx context.Context, s *sqlstore.Store, key string, value []byte, batch bool) (bool, []byte, error) {
			tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
			if err != nil {
				return false, nil, err
			}
			defer tx.Rollback()
			set, seen, err := claim(ctx, s.Tx(tx), key, value, batch)
			if err != nil {
				return false, nil, err
			}
			return set, seen, tx.Commit()
		}
	}
	pool, err := pgxpool.New(t.Context(), pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pgxTx := func(iso pgx.TxIsoLevel) claimer {
		return func(ctx context.Context, s *sqlstore.Store, key string, value []byte, batch bool) (bool, []byte, error) {
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			if err != nil {
				return false, nil, err
			}
			defer tx.Rollback(context.Background())
			set, seen, err := claim(ctx, pgxstore.View(s, tx), key, value, batch)
			if err != nil {
				return false, nil, err
			}
			return set, seen, tx.Commit(ctx)
		}
	}
	own := func(ctx context.Context, s *sqlstore.Store, key string, value []byte, batch bool) (bool, []byte, error) {
		return claim(ctx, s, key, value, batch)
	}
	cases := []struct {
		name string
		b    *backend
		opts []sqlstore.Option
		c    claimer
	}{
		{"postgres/own", pg, nil, own},
		{"postgres/tx", pg, nil, sqlTx(pg, sql.LevelDefault)},
		{"postgres/tx-repeatable-read", pg, nil, sqlTx(pg, sql.LevelRepeatableRead)},
		{"postgres/pgx", pg, nil, pgxTx(pgx.ReadCommitted)},
		{"postgres/pgx-repeatable-read", pg, nil, pgxTx(pgx.RepeatableRead)},
		{"mysql/own", my, nil, own},
		{"mysql/tx", my, nil, sqlTx(my, sql.LevelDefault)},
		{"mysql/tx-read-committed", my, nil, sqlTx(my, sql.LevelReadCommitted)},
		{"mysql/own-no-returning", my, []sqlstore.Option{sqlstore.WithoutReturning()}, own},
		{"mysql/tx-no-returning", my, []sqlstore.Option{sqlstore.WithoutReturning()}, sqlTx(my, sql.LevelDefault)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.b, append([]sqlstore.Option{sqlstore.WithoutSweeper()}, tc.opts...)...)
			ctx := t.Context()
			for r := range rounds {
				key := fmt.Sprintf("reclaim-%d", r)
				mustSet(t, s, key, []byte("old"), time.Millisecond)
				waitExpired(t, s, key)
				won, seen, errs := make([]bool, racers), make([][]byte, racers), make([]error, racers)
				var wg sync.WaitGroup
				for g := range racers {
					wg.Go(func() {
						won[g], seen[g], errs[g] = tc.c(ctx, s, key, []byte(fmt.Sprintf("racer-%d", g)), g%2 == 1)
					})
				}
				wg.Wait()
				winner, committed := -1, 0
				for g := range racers {
					switch {
					case errs[g] != nil && errors.Is(errs[g], store.ErrUnavailable) && tc.name[len(tc.name)-4:] != "/own" && !strings.HasSuffix(tc.name, "own-no-returning"):
						continue // a victim of the race: rolled back
					case errs[g] != nil:
						t.Fatalf("round %d: racer %d: %v", r, g, errs[g])
					case won[g] && winner >= 0:
						t.Fatalf("round %d: racers %d and %d both set the key", r, winner, g)
					case won[g]:
						winner = g
					}
					committed++
				}
				if winner < 0 {
					t.Fatalf("round %d: %d claims committed, none set the key", r, committed)
				}
				if testing.Verbose() {
					t.Logf("round %d: %d of %d claims committed", r, committed, racers)
				}
				want := fmt.Sprintf("racer-%d", winner)
				for g := range racers {
					if errs[g] == nil && !won[g] && string(seen[g]) != want {
						t.Fatalf("round %d: loser %d saw %q, want the winner's %q", r, g, seen[g], want)
					}
				}
				mustHold(t, s, key, []byte(want))
			}
		})
	}
}
