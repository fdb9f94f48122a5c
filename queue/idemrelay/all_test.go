package idemrelay_test

import (
	"errors"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/queue/idemrelay"
)

// declareQueue declares the queue name and deletes it when t ends.
func declareQueue(t *testing.T, conn *amqp.Connection, name string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
}

// TestAllPublishesToBothBrokers: one relay over one outbox publishes each
// event to JetStream and to RabbitMQ (the subject is both the stream's
// subject and the queue's name). An event RabbitMQ cannot route stays in
// the outbox although JetStream stored it; once its queue exists, the
// next attempt delivers it to RabbitMQ, and JetStream drops the copy.
func TestAllPublishesToBothBrokers(t *testing.T) {
	s := newOutbox(t, pg)
	js, conn := connect(t), dial(t)
	stream, subject := newStream(t, js)
	declareQueue(t, conn, subject)
	ids := enqueue(t, pg, s, subject, 0, 20)
	other := subject[:len(subject)-len("orders")] + "other"
	late := enqueue(t, pg, s, other, 20, 21)
	nats, _ := idemrelay.NewJetStream(js)
	rabbit, _ := idemrelay.NewAMQP(conn, "")
	pub, err := idemrelay.All(nats, rabbit)
	if err != nil {
		t.Fatal(err)
	}
	r, err := idemrelay.New(s, pub)
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Once(t.Context()); rep.Published != 20 || rep.Failed != 1 {
		t.Fatalf("report %+v; want 20 published, the unroutable one failed", rep)
	}
	declareQueue(t, conn, other)
	if _, err := pg.db.ExecContext(t.Context(), "UPDATE "+s.OutboxTable()+" SET available_at = created_at"); err != nil {
		t.Fatal(err)
	}
	if rep := r.Once(t.Context()); rep.Published != 1 || rep.Err != nil {
		t.Fatalf("report %+v; want the late one published", rep)
	}
	counts, stored := streamCounts(t, stream)
	if stored != 21 || len(counts) != 21 {
		t.Fatalf("stream holds %d messages of %d ids, want 21 once each", stored, len(counts))
	}
	deliveries, _ := consumeOnce(t, conn, subject, 20)
	lateDeliveries, _ := consumeOnce(t, conn, other, 1)
	for id := range ids {
		if deliveries[id] != 1 {
			t.Errorf("message %s delivered %d times by RabbitMQ", id, deliveries[id])
		}
	}
	for id := range late {
		if lateDeliveries[id] != 1 {
			t.Errorf("late message %s delivered %d times by RabbitMQ", id, lateDeliveries[id])
		}
	}
	for _, bad := range [][]idemrelay.Publisher{nil, {nats, nil}} {
		if _, err := idemrelay.All(bad...); !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("All(%v): %v, want ErrInvalid", bad, err)
		}
	}
}
