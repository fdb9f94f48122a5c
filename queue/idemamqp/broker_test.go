package idemamqp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpURL is the RabbitMQ the broker tests use: IDEMKIT_AMQP_URL, or the
// one scripts/test.sh starts on 127.0.0.1:5672.
func amqpURL() string {
	if u := os.Getenv("IDEMKIT_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// dial connects to the test broker, or fails the test saying how to start
// one.
func dial(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		t.Fatalf("connect to RabbitMQ: %v (start it with scripts/test.sh, or: rabbitmq-server -detached)", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// newQueue declares a queue of its own for the test and deletes it when
// the test ends.
func newQueue(t testing.TB, conn *amqp.Connection) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idemamqp-" + hex.EncodeToString(b[:])
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatalf("declare queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDelete(name, false, false, false)
			_ = ch.Close()
		}
		if err != nil {
			t.Errorf("delete queue %s: %v", name, err)
		}
	})
	return name
}

func channel(t testing.TB, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// publish publishes body to queue with a message ID and headers (name,
// value pairs).
func publish(t testing.TB, ch *amqp.Channel, queue, id, body string, hdr ...string) {
	t.Helper()
	p := amqp.Publishing{MessageId: id, Body: []byte(body), Headers: amqp.Table{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		p.Headers[hdr[i]] = hdr[i+1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ch.PublishWithContext(ctx, "", queue, false, false, p); err != nil {
		t.Fatal(err)
	}
}

// consume opens a channel with the given prefetch and consumes queue with
// manual acks.
func consume(t testing.TB, conn *amqp.Connection, queue string, prefetch int) (*amqp.Channel, <-chan amqp.Delivery) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ch, ds
}

// ready returns the number of messages of queue waiting for a consumer.
// Once every channel that consumed it is closed, unacknowledged messages
// are back among them, so 0 then means every message was acknowledged.
func ready(t testing.TB, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// newDeadLetteredQueue declares a queue whose rejected messages RabbitMQ
// dead-letters to a second queue, both its own, and returns both names.
func newDeadLetteredQueue(t testing.TB, conn *amqp.Connection) (queue, dead string) {
	t.Helper()
	dead = newQueue(t, conn)
	var b [6]byte
	_, _ = rand.Read(b[:])
	queue = "idemamqp-" + hex.EncodeToString(b[:])
	ch := channel(t, conn)
	args := amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead}
	if _, err := ch.QueueDeclare(queue, false, false, false, false, args); err != nil {
		t.Fatalf("declare queue %s: %v", queue, err)
	}
	t.Cleanup(func() { deleteQueue(t, conn, queue) })
	return queue, dead
}

// deleteQueue deletes queue, reporting a failure.
func deleteQueue(t testing.TB, conn *amqp.Connection, queue string) {
	ch, err := conn.Channel()
	if err == nil {
		_, err = ch.QueueDelete(queue, false, false, false)
		_ = ch.Close()
	}
	if err != nil {
		t.Errorf("delete queue %s: %v", queue, err)
	}
}
