package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// newOutboxStore returns a Store over fresh record and outbox tables of b.
func newOutboxStore(t testing.TB, b *backend) *sqlstore.Store {
	t.Helper()
	outbox := fmt.Sprintf("ob%d_%s", tables.Add(1), strings.ToLower(randHex(2)))
	s := newStore(t, b, sqlstore.WithOutboxTable(outbox), sqlstore.WithoutSweeper())
	if err := s.CreateOutbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := b.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+outbox); err != nil {
			t.Errorf("dropping %s: %v", outbox, err)
		}
	})
	return s
}

// pendingIDs returns the message ids in s's outbox, in order.
func pendingIDs(t testing.TB, b *backend, s *sqlstore.Store) []string {
	t.Helper()
	rows, err := b.db.QueryContext(t.Context(), "SELECT msg_id FROM "+s.OutboxTable()+" ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func placed(order string) sqlstore.Message {
	return sqlstore.Message{
		Scope: "user-1", Key: order, Event: "order.placed", Subject: "orders.placed",
		Headers: map[string]string{"Content-Type": "application/json"},
		Payload: []byte(`{"order":"` + order + `"}`),
	}
}

// TestOutboxEnqueueCommitsWithTheTransaction enqueues through a View on
// the caller's transaction (database/sql on both servers, and native
// pgx): a rollback leaves no row, a commit leaves the row with its id,
// and the business row commits with it.
func TestOutboxEnqueueCommitsWithTheTransaction(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			s, orders := newOutboxStore(t, k.b), ordersTable(t, k.b)

			tx := k.begin(t, s, orders)
			mustInsertAndEnqueue(t, tx, placed("o-1"))
			if err := tx.rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if ids := pendingIDs(t, k.b, s); len(ids) != 0 || countOrders(t, k.b, orders) != 0 {
				t.Fatalf("after rollback: outbox %v, %d orders; want both empty", ids, countOrders(t, k.b, orders))
			}

			tx = k.begin(t, s, orders)
			mustInsertAndEnqueue(t, tx, placed("o-1"))
			if err := tx.commit(ctx); err != nil {
				t.Fatal(err)
			}
			want := sqlstore.MessageID("user-1", "o-1", "order.placed")
			if ids := pendingIDs(t, k.b, s); len(ids) != 1 || ids[0] != want || countOrders(t, k.b, orders) != 1 {
				t.Fatalf("after commit: outbox %v, %d orders; want [%s], 1", ids, countOrders(t, k.b, orders), want)
			}
		})
	}
}

func mustInsertAndEnqueue(t *testing.T, tx bizTx, m sqlstore.Message) {
	t.Helper()
	if err := tx.insert(t.Context(), m.Key); err != nil {
		t.Fatal(err)
	}
	id, err := tx.view.(*sqlstore.View).Enqueue(t.Context(), m)
	if err != nil || id != sqlstore.MessageID(m.Scope, m.Key, m.Event) {
		t.Fatalf("Enqueue = %q, %v; want its MessageID, nil", id, err)
	}
}

// TestOutboxDuplicateKeepsTheTransaction enqueues one message twice in a
// transaction: the second gets ErrDuplicateMessage, and the transaction
// goes on to commit its other statements (PostgreSQL would abort it on a
// unique violation).
func TestOutboxDuplicateKeepsTheTransaction(t *testing.T) {
	for _, k := range txKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			s, orders := newOutboxStore(t, k.b), ordersTable(t, k.b)
			tx := k.begin(t, s, orders)
			v := tx.view.(*sqlstore.View)
			if _, err := v.Enqueue(t.Context(), placed("o-1")); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Enqueue(t.Context(), placed("o-1")); !errors.Is(err, sqlstore.ErrDuplicateMessage) {
				t.Fatalf("second Enqueue: %v, want ErrDuplicateMessage", err)
			}
			if err := tx.insert(t.Context(), "o-1"); err != nil {
				t.Fatalf("the transaction after a duplicate: %v", err)
			}
			if err := tx.commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if ids := pendingIDs(t, k.b, s); len(ids) != 1 || countOrders(t, k.b, orders) != 1 {
				t.Fatalf("outbox %v, %d orders; want one of each", ids, countOrders(t, k.b, orders))
			}
		})
	}
}

// TestOutboxMessageID: the id depends on scope, key and event, holds no
// byte of the key, and the length prefixes keep shifted triples apart.
func TestOutboxMessageID(t *testing.T) {
	const secret = "sk_live_4242424242"
	id := sqlstore.MessageID("user-1", secret, "order.placed")
	if len(id) != 64 || strings.Contains(id, secret) || id != sqlstore.MessageID("user-1", secret, "order.placed") {
		t.Fatalf("MessageID = %q: want 64 hex digits, stable, without the key", id)
	}
	others := []string{
		sqlstore.MessageID("user-2", secret, "order.placed"),
		sqlstore.MessageID("user-1", secret, "order.paid"),
		sqlstore.MessageID("user-1", "other", "order.placed"),
		sqlstore.MessageID("user-1"+secret, "", "order.placed"),
		sqlstore.MessageID("", "user-1"+secret, "order.placed"),
	}
	seen := map[string]bool{id: true}
	for _, o := range others {
		if seen[o] {
			t.Fatalf("MessageID collides: %q", o)
		}
		seen[o] = true
	}
}

// TestOutboxRefusesBadMessages: each broken limit is refused with
// store.ErrInvalid naming it, and nothing is written.
func TestOutboxRefusesBadMessages(t *testing.T) {
	s := newOutboxStore(t, pg)
	long := strings.Repeat("x", 256)
	cases := []struct {
		name, want string
		edit       func(*sqlstore.Message)
	}{
		{"empty key", "empty key", func(m *sqlstore.Message) { m.Key = "" }},
		{"empty event", "empty event", func(m *sqlstore.Message) { m.Event = "" }},
		{"long event", "event name of 256 bytes", func(m *sqlstore.Message) { m.Event = long }},
		{"empty subject", "empty subject", func(m *sqlstore.Message) { m.Subject = "" }},
		{"long subject", "subject of 256 bytes", func(m *sqlstore.Message) { m.Subject = long }},
		{"empty header name", "empty name", func(m *sqlstore.Message) { m.Headers = map[string]string{"": "v"} }},
		{"header name with a colon", "header name \"a:b\"", func(m *sqlstore.Message) { m.Headers = map[string]string{"a:b": "v"} }},
		{"header name with a space", "header name \"a b\"", func(m *sqlstore.Message) { m.Headers = map[string]string{"a b": "v"} }},
		{"header value with a line break", "header X: the value", func(m *sqlstore.Message) { m.Headers = map[string]string{"X": "a\r\nInjected: 1"} }},
		{"header value not UTF-8", "header X: the value", func(m *sqlstore.Message) { m.Headers = map[string]string{"X": "\xff"} }},
		{"oversized payload", "payload of", func(m *sqlstore.Message) { m.Payload = make([]byte, sqlstore.MaxPayloadLen+1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := placed("o-1")
			c.edit(&m)
			_, err := s.Tx(pg.db).Enqueue(t.Context(), m)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Enqueue: %v; want ErrInvalid saying %q", err, c.want)
			}
		})
	}
	if ids := pendingIDs(t, pg, s); len(ids) != 0 {
		t.Fatalf("outbox %v after refused messages, want empty", ids)
	}
	if _, err := s.ClaimOutbox(t.Context(), 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ClaimOutbox(0): %v, want ErrInvalid", err)
	}
}

// TestOutboxWithoutTable names the missing table and the remedy.
func TestOutboxWithoutTable(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b, sqlstore.WithOutboxTable("no_such_outbox"), sqlstore.WithoutSweeper())
			_, err := s.Tx(b.db).Enqueue(t.Context(), placed("o-1"))
			if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "no_such_outbox does not exist") {
				t.Fatalf("Enqueue: %v; want ErrUnavailable naming the table", err)
			}
		})
	}
}

// TestOutboxClaimsRaceEachRowOnce: concurrent claimers over one outbox
// (FOR UPDATE SKIP LOCKED) each take disjoint batches; every row is
// finished by exactly one of them and the outbox ends empty.
func TestOutboxClaimsRaceEachRowOnce(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			s := newOutboxStore(t, b)
			const rows, claimers, batch = 300, 8, 7
			for i := range rows {
				if _, err := s.Tx(b.db).Enqueue(ctx, placed(fmt.Sprint("o-", i))); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			got := map[string]int{}
			var wg sync.WaitGroup
			errs := make(chan error, claimers)
			for range claimers {
				wg.Go(func() {
					for {
						bt, err := s.ClaimOutbox(ctx, batch)
						if err != nil {
							errs <- err
							return
						}
						msgs := bt.Messages()
						if len(msgs) == 0 {
							errs <- bt.Release()
							return
						}
						var seqs []int64
						mu.Lock()
						for _, m := range msgs {
							got[m.ID]++
							seqs = append(seqs, m.Seq)
						}
						mu.Unlock()
						if err := bt.Finish(ctx, seqs, nil); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(got) != rows {
				t.Fatalf("%d distinct messages claimed, want %d", len(got), rows)
			}
			for id, n := range got {
				if n != 1 {
					t.Errorf("message %s claimed %d times", id, n)
				}
			}
			if ids := pendingIDs(t, b, s); len(ids) != 0 {
				t.Fatalf("%d rows left", len(ids))
			}
		})
	}
}

// TestOutboxReleaseAndRetry: a released batch leaves its rows claimable
// at once; a retried row counts the attempt and is not due until its
// delay has passed; OutboxState reports the rows and the oldest's age.
func TestOutboxReleaseAndRetry(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			s := newOutboxStore(t, b)
			for _, o := range []string{"o-1", "o-2"} {
				if _, err := s.Tx(b.db).Enqueue(ctx, placed(o)); err != nil {
					t.Fatal(err)
				}
			}
			bt := mustClaim(t, s, 10, 2)
			m := bt.Messages()[0]
			if m.Event != "order.placed" || m.Subject != "orders.placed" || string(m.Payload) != `{"order":"o-1"}` ||
				m.Headers["Content-Type"] != "application/json" || m.Attempts != 0 || m.Age < 0 {
				t.Fatalf("claimed %+v", m)
			}
			if err := bt.Release(); err != nil {
				t.Fatal(err)
			}
			bt = mustClaim(t, s, 10, 2)
			first, second := bt.Messages()[0], bt.Messages()[1]
			if err := bt.Finish(ctx, []int64{second.Seq}, []sqlstore.Retry{{Seq: first.Seq, After: time.Hour}}); err != nil {
				t.Fatal(err)
			}
			mustClaim(t, s, 10, 0).Release() // the retried row is not due for an hour
			st, err := s.OutboxState(ctx)
			if err != nil || st.Pending != 1 || st.Lag <= 0 || st.Lag > time.Minute {
				t.Fatalf("OutboxState = %+v, %v; want 1 pending with a positive lag", st, err)
			}
			if _, err := b.db.ExecContext(ctx, "UPDATE "+s.OutboxTable()+" SET available_at = created_at"); err != nil {
				t.Fatal(err)
			}
			bt = mustClaim(t, s, 10, 1)
			if got := bt.Messages()[0]; got.Seq != first.Seq || got.Attempts != 1 {
				t.Fatalf("retried row %+v, want seq %d with 1 attempt", got, first.Seq)
			}
			if err := bt.Finish(ctx, []int64{first.Seq}, nil); err != nil {
				t.Fatal(err)
			}
			if err := bt.Finish(ctx, nil, nil); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("second Finish: %v, want ErrInvalid", err)
			}
			if st, err := s.OutboxState(ctx); err != nil || st != (sqlstore.OutboxState{}) {
				t.Fatalf("OutboxState = %+v, %v; want empty", st, err)
			}
		})
	}
}

func mustClaim(t *testing.T, s *sqlstore.Store, n, want int) *sqlstore.OutboxBatch {
	t.Helper()
	bt, err := s.ClaimOutbox(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(bt.Messages()); got != want {
		bt.Release()
		t.Fatalf("claimed %d messages, want %d", got, want)
	}
	return bt
}

// TestOutboxEnqueueOnPgxPool: a View on a pgx pool enqueues outside any
// transaction (each statement commits).
func TestOutboxEnqueueOnPgxPool(t *testing.T) {
	s := newOutboxStore(t, pg)
	pool, err := pgxpool.New(t.Context(), pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pgxstore.View(s, pool).Enqueue(t.Context(), placed("o-9")); err != nil {
		t.Fatal(err)
	}
	if ids := pendingIDs(t, pg, s); len(ids) != 1 {
		t.Fatalf("outbox %v, want one row", ids)
	}
}
