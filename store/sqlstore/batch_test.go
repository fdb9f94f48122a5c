package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// countConn counts the statements run on it, and the bytes of their
// []byte arguments.
type countConn struct {
	sqlstore.Conn
	mu    sync.Mutex
	n     int
	bytes int
}

func (c *countConn) count(args []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	for _, a := range args {
		if b, ok := a.([]byte); ok {
			c.bytes += len(b)
		}
	}
}

func (c *countConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	c.count(args)
	return c.Conn.Exec(ctx, query, args...)
}

func (c *countConn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	c.count(args)
	return c.Conn.Query(ctx, query, args...)
}

// take returns the count and resets it.
func (c *countConn) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = 0
	return n
}

// countQuerier counts the statements run on a Querier, for Views.
type countQuerier struct {
	q sqlstore.Querier
	n int
}

func (c *countQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n++
	return c.q.ExecContext(ctx, query, args...)
}

func (c *countQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n++
	return c.q.QueryContext(ctx, query, args...)
}

// batchOf returns n items of keys prefix:0 ... prefix:n-1.
func batchOf(prefix string, n int, value string, ttl time.Duration) []store.BatchItem {
	items := make([]store.BatchItem, n)
	for i := range items {
		items[i] = store.BatchItem{Key: prefix + ":" + strconv.Itoa(i), Value: []byte(value), TTL: ttl}
	}
	return items
}

// mixedBatch sets up a batch of n keys of which a third are new, a third
// held and a third expired, plus a duplicate of each kind, and returns it
// with the number of keys it must set.
func mixedBatch(t *testing.T, s store.Store, prefix string, n int) ([]store.BatchItem, int) {
	t.Helper()
	items := batchOf(prefix, n, "mine", time.Hour)
	lastOld := ""
	for i := range items {
		switch i % 3 {
		case 1:
			mustSet(t, s, items[i].Key, []byte("held"), time.Hour)
		case 2:
			mustSet(t, s, items[i].Key, []byte("old"), time.Millisecond)
			lastOld = items[i].Key
		}
	}
	waitExpired(t, s, lastOld) // and with it every "old" key set before it
	items = append(items, items[0], items[1], items[2])
	return items, n - (n+1)/3
}

// checkBatch checks a batch from mixedBatch: the new and expired keys set,
// the held ones not, duplicates reported as held by the first occurrence.
func checkBatch(t *testing.T, items []store.BatchItem, res []store.BatchResult, wantSet int) {
	t.Helper()
	if len(res) != len(items) {
		t.Fatalf("%d results for %d items", len(res), len(items))
	}
	n := len(items) - 3
	set := 0
	for i, r := range res[:n] {
		want := i%3 != 1
		if r.Set != want || !want && string(r.Existing.Value) != "held" {
			t.Fatalf("item %d (%s): %+v, want Set %v", i, items[i].Key, r, want)
		}
		if r.Set {
			set++
		}
	}
	if set != wantSet {
		t.Fatalf("set %d keys, want %d", set, wantSet)
	}
	for j, r := range res[n:] {
		want := "mine"
		if j == 1 {
			want = "held"
		}
		if r.Set || string(r.Existing.Value) != want {
			t.Fatalf("duplicate %d: %+v, want held with %q", j, r, want)
		}
	}
}

// TestBatchStatements counts the statements one SetNXBatch runs: one for
// a batch of new, held and expired keys on PostgreSQL and MariaDB 10.5+,
// on the Store's pool or in a View, one a replay, one per 512 keys on
// MariaDB; without RETURNING, an INSERT and a SELECT in a View's
// transaction (TestBatchTransaction counts the Store's own BEGIN and
// COMMIT).
func TestBatchStatements(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name   string
		b      *backend
		opts   []sqlstore.Option
		n      int
		own    int // statements on the Store's own pool
		inView int // statements in a View on a transaction
	}{
		{"postgres", pg, nil, 100, 1, 1},
		{"postgres/2000", pg, nil, 2000, 1, 1},
		{"mysql", my, nil, 100, 1, 1},
		{"mysql/1100", my, nil, 1100, 3, 3},
		{"mysql/NoReturning", my, []sqlstore.Option{sqlstore.WithoutReturning()}, 100, -1, 2},
		{"mysql/NoReturning/1100", my, []sqlstore.Option{sqlstore.WithoutReturning()}, 1100, -1, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, c.b, c.opts...)
			var cc *countConn
			sqlstore.WrapOwnConn(s, func(c sqlstore.Conn) sqlstore.Conn {
				cc = &countConn{Conn: c}
				return cc
			})
			// Ask the server's version first, as the Store does once.
			if _, err := s.SetNXBatch(ctx, batchOf("warm", 1, "v", time.Hour)); err != nil {
				t.Fatal(err)
			}
			cc.take()
			if c.own >= 0 {
				items, wantSet := mixedBatch(t, s, "own", c.n)
				cc.take()
				res, err := s.SetNXBatch(ctx, items)
				if err != nil {
					t.Fatal(err)
				}
				if got := cc.take(); got != c.own {
					t.Errorf("a batch of %d keys on the Store's pool ran %d statements, want %d", c.n, got, c.own)
				}
				checkBatch(t, items, res, wantSet)
				if res, err = s.SetNXBatch(ctx, items); err != nil {
					t.Fatal(err)
				}
				if got := cc.take(); got != c.own {
					t.Errorf("a replayed batch of %d keys on the Store's pool ran %d statements, want %d", c.n, got, c.own)
				}
				for i, r := range res {
					if r.Set {
						t.Fatalf("replay: item %d set", i)
					}
				}
			}
			items, wantSet := mixedBatch(t, s, "view", c.n)
			tx, err := c.b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			q := &countQuerier{q: tx}
			res, err := s.Tx(q).SetNXBatch(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			if q.n != c.inView {
				t.Errorf("a batch of %d keys in a View ran %d statements, want %d", c.n, q.n, c.inView)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			checkBatch(t, items, res, wantSet)
		})
	}
}

// TestBatchPgx claims a batch through pgx's native API (pgxstore), which
// encodes the statement's arrays itself, in a pgx.Tx.
func TestBatchPgx(t *testing.T) {
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := newStore(t, pg)
	items, wantSet := mixedBatch(t, s, "k", 30)
	items = append(items, store.BatchItem{Key: "empty", Value: []byte{}, TTL: time.Minute})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := pgxstore.View(s, tx).SetNXBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !res[len(res)-1].Set {
		t.Fatalf("the empty value's key was not set: %+v", res[len(res)-1])
	}
	checkBatch(t, items[:len(items)-1], res[:len(res)-1], wantSet)
	for i, it := range items[:30] {
		want := "mine"
		if i%3 == 1 {
			want = "held"
		}
		if e, err := s.Get(ctx, it.Key); err != nil || string(e.Value) != want {
			t.Fatalf("Get(%s) = %q, %v; want %q", it.Key, e.Value, err, want)
		}
	}
	if e, err := s.Get(ctx, "empty"); err != nil || e.Value == nil || len(e.Value) != 0 {
		t.Fatalf("Get(empty) = %#v, %v; want an empty value", e, err)
	}
}

// TestBatchTransaction counts the round trips of a batch on MySQL without
// RETURNING on the Store's own pool, with the server's own counters:
// BEGIN, INSERT, SELECT, COMMIT.
func TestBatchTransaction(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("mysql", my.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one session, whose counters the test reads
	s, err := sqlstore.New(db, sqlstore.MySQL, sqlstore.WithTable(freshTable(t, my)), sqlstore.WithoutReturning(), sqlstore.WithoutSweeper())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The session's statement count: Questions counts every statement a
	// client sends, COM_STMT_EXECUTE included, and this query too.
	questions := func() int {
		t.Helper()
		var name string
		var n int
		if err := db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 { // prepare the statements (in the background for transactions)
		if _, err := s.SetNXBatch(ctx, batchOf("warm", 100, "v", time.Hour)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	items, wantSet := mixedBatch(t, s, "k", 100)
	before := questions()
	res, err := s.SetNXBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if got := questions() - before - 1; got != 4 {
		t.Errorf("a batch of 100 keys sent %d statements, want 4 (BEGIN, INSERT, SELECT, COMMIT)", got)
	}
	checkBatch(t, items, res, wantSet)
}

// TestBatchRaceOneWinner races goroutines claiming overlapping batches of
// the same keys, in random orders and with duplicates, over keys that are
// new, or held, or expired: every key has exactly one winner, which every
// other claimant sees, and holds the winner's value.
func TestBatchRaceOneWinner(t *testing.T) {
	const (
		racers = 12
		keys   = 48
		window = 24
		rounds = 4
	)
	for _, c := range []struct {
		name string
		b    *backend
		opts []sqlstore.Option
		view bool
	}{
		{"postgres", pg, nil, false},
		{"postgres/Async", pg, []sqlstore.Option{sqlstore.WithAsyncClaims()}, false},
		{"postgres/View", pg, nil, true},
		{"mysql", my, nil, false},
		{"mysql/View", my, nil, true},
		{"mysql/NoReturning", my, []sqlstore.Option{sqlstore.WithoutReturning()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t, c.b, c.opts...)
			var st interface {
				store.Store
				store.Batcher
			} = s
			if c.view {
				st = s.Tx(c.b.db)
			}
			for r := range rounds {
				prefix := "r" + strconv.Itoa(r)
				// A third of the keys held until the round, a third
				// expired: claimable.
				lastOld := ""
				for k := range keys {
					switch k % 3 {
					case 1:
						mustSet(t, s, fmt.Sprintf("%s:%d", prefix, k), []byte("held"), time.Hour)
					case 2:
						lastOld = fmt.Sprintf("%s:%d", prefix, k)
						mustSet(t, s, lastOld, []byte("old"), time.Millisecond)
					}
				}
				waitExpired(t, s, lastOld) // and with it every "old" key set before it
				items := make([][]store.BatchItem, racers)
				res := make([][]store.BatchResult, racers)
				errs := make([]error, racers)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range racers {
					for j := range window {
						k := (g*keys/racers + j) % keys
						items[g] = append(items[g], store.BatchItem{Key: fmt.Sprintf("%s:%d", prefix, k), Value: []byte("g" + strconv.Itoa(g)), TTL: time.Hour})
					}
					items[g] = append(items[g], items[g][rand.IntN(window)], items[g][rand.IntN(window)])
					rand.Shuffle(len(items[g]), func(i, j int) { items[g][i], items[g][j] = items[g][j], items[g][i] })
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						res[g], errs[g] = st.SetNXBatch(ctx, items[g])
					}()
				}
				close(start)
				wg.Wait()
				winners := map[string][]string{}
				seen := map[string][]string{}
				for g := range racers {
					if errs[g] != nil {
						t.Fatalf("round %d: racer %d: %v", r, g, errs[g])
					}
					claimed := map[string]bool{}
					for j, it := range items[g] {
						switch rs := res[g][j]; {
						case rs.Set && claimed[it.Key]:
							t.Fatalf("round %d: racer %d set %s twice", r, g, it.Key)
						case rs.Set:
							claimed[it.Key] = true
							winners[it.Key] = append(winners[it.Key], string(it.Value))
						default:
							seen[it.Key] = append(seen[it.Key], string(rs.Existing.Value))
						}
					}
				}
				for k := range keys {
					key := fmt.Sprintf("%s:%d", prefix, k)
					want := "held"
					if k%3 != 1 {
						if len(winners[key]) != 1 {
							t.Fatalf("round %d: key %s won by %v, want exactly one winner", r, key, winners[key])
						}
						want = winners[key][0]
					} else if len(winners[key]) != 0 {
						t.Fatalf("round %d: held key %s won by %v", r, key, winners[key])
					}
					for _, v := range seen[key] {
						if v != want {
							t.Fatalf("round %d: a loser of %s saw %q, want %q", r, key, v, want)
						}
					}
					e, err := s.Get(ctx, key)
					if err != nil || string(e.Value) != want {
						t.Fatalf("round %d: Get(%s) = %q, %v; want %q", r, key, e.Value, err, want)
					}
				}
			}
		})
	}
}

// BenchmarkBatchClaim times 100 claims of new keys as one SetNXBatch
// beside 100 SetNX, interleaved, on the same Store:
//
//	go test -run '^$' -bench BatchClaim -benchtime 20x ./store/sqlstore/
//
// It reports the time of each per 100 claims (ns-batch, ns-single) and
// how many times faster the batch is (x-faster).
func BenchmarkBatchClaim(b *testing.B) {
	const n = 100
	for _, c := range []struct {
		name string
		b    *backend
		opts []sqlstore.Option
	}{
		{"postgres", pg, nil},
		{"mysql", my, nil},
		{"mysql/NoReturning", my, []sqlstore.Option{sqlstore.WithoutReturning()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newStore(b, c.b, c.opts...)
			ctx := context.Background()
			value := []byte("claim:0123456789abcdef")
			batch := func() error {
				items := make([]store.BatchItem, n)
				for i := range items {
					items[i] = store.BatchItem{Key: string(benchKey()), Value: value, TTL: time.Hour}
				}
				res, err := s.SetNXBatch(ctx, items)
				for _, r := range res {
					if !r.Set {
						return fmt.Errorf("SetNXBatch of a new key did not set it")
					}
				}
				return err
			}
			single := func() error {
				for range n {
					set, _, err := s.SetNX(ctx, string(benchKey()), value, time.Hour)
					if err != nil {
						return err
					}
					if !set {
						return fmt.Errorf("SetNX of a new key did not set it")
					}
				}
				return nil
			}
			tBatch, tSingle := alternate(b, 3, batch, single)
			b.ReportMetric(float64(tBatch.Nanoseconds())/float64(b.N), "ns-batch")
			b.ReportMetric(float64(tSingle.Nanoseconds())/float64(b.N), "ns-single")
			b.ReportMetric(float64(tSingle)/float64(tBatch), "x-faster")
		})
	}
}

// TestBatchEmptyValue claims keys with empty values, which a NULL in the
// statement's arrays or rows would lose, and reads them back, on each
// database and with a replay.
func TestBatchEmptyValue(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t, b)
			items := []store.BatchItem{{Key: "a", Value: []byte{}, TTL: time.Minute}, {Key: "b", Value: []byte("x"), TTL: time.Minute}}
			for round, wantSet := range []bool{true, false} {
				res, err := s.SetNXBatch(ctx, items)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					if r.Set != wantSet || !wantSet && (r.Existing.Value == nil || string(r.Existing.Value) != string(items[i].Value)) {
						t.Fatalf("round %d, item %d: %#v, want Set %v", round, i, r, wantSet)
					}
				}
			}
			if e, err := s.Get(ctx, "a"); err != nil || e.Value == nil || len(e.Value) != 0 {
				t.Fatalf("Get(a) = %#v, %v; want an empty value", e, err)
			}
		})
	}
}

// TestBatchPaddingSendsNoValues: MySQL's statements are padded to a power
// of two rows by repeating the last key; the padding rows carry no value,
// so a batch of 129 keys sends its 129 values once, not the last one 127
// more times.
func TestBatchPaddingSendsNoValues(t *testing.T) {
	for _, opts := range [][]sqlstore.Option{nil, {sqlstore.WithoutReturning()}} {
		s := newStore(t, my, opts...)
		var cc *countConn
		sqlstore.WrapOwnConn(s, func(c sqlstore.Conn) sqlstore.Conn {
			cc = &countConn{Conn: c}
			return cc
		})
		if _, err := s.SetNXBatch(t.Context(), batchOf("pad-warm", 1, "v", time.Hour)); err != nil {
			t.Fatal(err)
		}
		value := strings.Repeat("v", 4096)
		items := batchOf("pad", 129, value, time.Hour)
		cc.mu.Lock()
		cc.bytes = 0
		cc.mu.Unlock()
		res, err := s.SetNXBatch(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Set {
				t.Fatalf("item %d not set", i)
			}
		}
		cc.mu.Lock()
		sent := cc.bytes
		cc.mu.Unlock()
		if limit := 129*len(value) + 2*256*64; sent > limit {
			t.Errorf("a batch of 129 values of %d bytes sent %d bytes of arguments, want at most %d", len(value), sent, limit)
		}
	}
}
