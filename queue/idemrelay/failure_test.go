package idemrelay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/idemkit/idemkit/queue/idemrelay"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// attempts returns the attempts column of s's rows, by message id.
func attempts(t *testing.T, b *backend, s *sqlstore.Store) map[string]int {
	t.Helper()
	rows, err := b.db.QueryContext(t.Context(), "SELECT msg_id, attempts FROM "+s.OutboxTable())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// TestRelayKeepsAMessageOverTheBrokersLimit: a payload over NATS's
// max_payload fails with a clear error, counted as failed, and its row
// stays with the attempt counted; the batch's other messages are
// published and removed.
func TestRelayKeepsAMessageOverTheBrokersLimit(t *testing.T) {
	s := newOutbox(t, pg)
	js := connect(t)
	stream, subject := newStream(t, js)
	ids := enqueue(t, pg, s, subject, 0, 3)
	big := event(subject, 99)
	big.Payload = make([]byte, js.Conn().MaxPayload()+1)
	bigID, err := s.Tx(pg.db).Enqueue(t.Context(), big)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := idemrelay.NewJetStream(js)
	r, err := idemrelay.New(s, pub, idemrelay.WithBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Once(t.Context())
	if rep.Claimed != 4 || rep.Published != 3 || rep.Failed != 1 || !errors.Is(rep.Err, nats.ErrMaxPayload) || !strings.Contains(rep.Err.Error(), bigID) {
		t.Fatalf("report %+v; want 4 claimed, 3 published, 1 failed naming %s with nats.ErrMaxPayload", rep, bigID)
	}
	if got := attempts(t, pg, s); len(got) != 1 || got[bigID] != 1 {
		t.Fatalf("rows left %v, want only %s with 1 attempt", got, bigID)
	}
	if st := r.Stats(); st.Published != 3 || st.Failed != 1 || st.Errors != 1 {
		t.Fatalf("stats %+v", st)
	}
	counts, _ := streamCounts(t, stream)
	for id := range ids {
		if counts[id] != 1 {
			t.Errorf("message %s stored %d times, want 1", id, counts[id])
		}
	}
	if rep := r.Once(t.Context()); rep.Claimed != 0 {
		t.Fatalf("the failed row was claimed again at once: %+v; want it deferred by the back-off", rep)
	}
}

// TestRelayBacksOffWhileTheBrokerIsUnreachable: with the broker's
// connection closed, every batch fails, nothing is removed, the wait
// before the next batch doubles up to the maximum, and each row counts
// its attempts; on a working connection the same rows are published.
func TestRelayBacksOffWhileTheBrokerIsUnreachable(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newOutbox(t, b)
			js := connect(t)
			stream, subject := newStream(t, js)
			ids := enqueue(t, b, s, subject, 0, 5)
			down := connect(t)
			down.Conn().Close()
			pub, _ := idemrelay.NewJetStream(down)
			var reports []idemrelay.Report
			r, err := idemrelay.New(s, pub, idemrelay.WithBackoff(time.Millisecond, 4*time.Millisecond),
				idemrelay.WithObserver(func(rep idemrelay.Report) { reports = append(reports, rep) }))
			if err != nil {
				t.Fatal(err)
			}
			var waits []time.Duration
			for range 4 {
				// Each row is deferred by its own back-off: make them due.
				if _, err := b.db.ExecContext(t.Context(), "UPDATE "+s.OutboxTable()+" SET available_at = created_at"); err != nil {
					t.Fatal(err)
				}
				rep := r.Once(t.Context())
				if rep.Claimed != 5 || rep.Published != 0 || rep.Failed != 5 || rep.Err == nil || !strings.Contains(rep.Err.Error(), "connection closed") {
					t.Fatalf("report %+v; want 5 claimed and failed: connection closed", rep)
				}
				waits = append(waits, rep.Wait)
			}
			if want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}; !equalDurations(waits, want) {
				t.Fatalf("waits %v, want %v", waits, want)
			}
			if len(reports) != 4 {
				t.Fatalf("observer saw %d reports, want 4", len(reports))
			}
			if st := r.Stats(); st.Batches != 4 || st.Failed != 20 || st.Errors != 4 || st.Published != 0 || st.Lag <= 0 {
				t.Fatalf("stats %+v; want 4 batches, 20 failed, 4 errors, a positive lag", st)
			}
			if p, err := r.Pending(t.Context()); err != nil || p.Pending != 5 || p.Lag <= 0 {
				t.Fatalf("Pending = %+v, %v; want 5 rows and a positive lag", p, err)
			}
			for id, n := range attempts(t, b, s) {
				if !ids[id] || n != 4 {
					t.Fatalf("row %s: %d attempts, want 4", id, n)
				}
			}
			if _, err := b.db.ExecContext(t.Context(), "UPDATE "+s.OutboxTable()+" SET available_at = created_at"); err != nil {
				t.Fatal(err)
			}
			up, _ := idemrelay.NewJetStream(js)
			r2, err := idemrelay.New(s, up)
			if err != nil {
				t.Fatal(err)
			}
			if rep := r2.Once(t.Context()); rep.Published != 5 || rep.Err != nil {
				t.Fatalf("report %+v, want 5 published", rep)
			}
			if counts, n := streamCounts(t, stream); n != 5 || len(counts) != 5 {
				t.Fatalf("stream holds %d messages of %d ids, want 5", n, len(counts))
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRelayKeepsAnUnroutableAMQPMessage: a message no queue takes comes
// back from RabbitMQ (mandatory); its row stays, and a message routed to
// a queue in the same batch is published.
func TestRelayKeepsAnUnroutableAMQPMessage(t *testing.T) {
	s := newOutbox(t, my)
	conn := dial(t)
	queue := newQueue(t, conn)
	routed := enqueue(t, my, s, queue, 0, 2)
	lost := enqueue(t, my, s, queue+"-no-such-queue", 2, 3)
	pub, _ := idemrelay.NewAMQP(conn, "")
	defer pub.Close()
	r, err := idemrelay.New(s, pub)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Once(t.Context())
	if rep.Published != 2 || rep.Failed != 1 || rep.Err == nil || !strings.Contains(rep.Err.Error(), "unroutable") {
		t.Fatalf("report %+v; want 2 published, 1 failed as unroutable", rep)
	}
	left := attempts(t, my, s)
	for id := range lost {
		if left[id] != 1 || len(left) != 1 {
			t.Fatalf("rows left %v, want only the unroutable one with 1 attempt", left)
		}
	}
	deliveries, effects := consumeOnce(t, conn, queue, len(routed))
	for id := range routed {
		if deliveries[id] != 1 || effects[id] != 1 {
			t.Fatalf("message %s: %d deliveries, %d effects; want 1 and 1", id, deliveries[id], effects[id])
		}
	}
}

// TestRelayOnAMissingOutbox: a relay whose outbox table does not exist
// reports it, names the table, and backs off.
func TestRelayOnAMissingOutbox(t *testing.T) {
	s := openOutbox(t, pg, "no_records", "no_such_outbox", false)
	pub, _ := idemrelay.NewJetStream(connect(t))
	r, err := idemrelay.New(s, pub, idemrelay.WithBackoff(time.Second, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Once(context.Background())
	if rep.Err == nil || !strings.Contains(rep.Err.Error(), "no_such_outbox does not exist") || rep.Wait != time.Second {
		t.Fatalf("report %+v; want an error naming the table and a 1s back-off", rep)
	}
}

// cancellingPublisher confirms every message, then cancels the relay's context
// before returning: a shutdown that arrives while a batch's confirms are
// in.
type cancellingPublisher struct {
	idemrelay.Publisher
	cancel context.CancelFunc
}

func (p cancellingPublisher) Publish(ctx context.Context, msgs []sqlstore.OutboxMessage) []idemrelay.Confirm {
	out := p.Publisher.Publish(ctx, msgs)
	p.cancel()
	return out
}

// TestRelayShutdownStillRemovesConfirmedRows: when the relay's context
// ends after the broker confirmed a batch, the batch's rows are removed
// all the same, so the next relay does not publish them again.
func TestRelayShutdownStillRemovesConfirmedRows(t *testing.T) {
	s := newOutbox(t, my)
	js := connect(t)
	stream, subject := newStream(t, js)
	enqueue(t, my, s, subject, 0, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub, _ := idemrelay.NewJetStream(js)
	r, err := idemrelay.New(s, cancellingPublisher{pub, cancel})
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Once(ctx); rep.Published != 10 || ctx.Err() == nil {
		t.Fatalf("report %+v, context %v; want 10 published after the cancellation", rep, ctx.Err())
	}
	if n := pending(t, s); n != 0 {
		t.Fatalf("%d rows left, want 0", n)
	}
	if _, stored := streamCounts(t, stream); stored != 10 {
		t.Fatalf("stream holds %d, want 10", stored)
	}
}
