package idemrelay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// natsURL is the JetStream server the tests use: IDEMKIT_NATS_URL, or the
// one scripts/test.sh starts on 127.0.0.1:4222.
func natsURL() string { return envOr("IDEMKIT_NATS_URL", "nats://127.0.0.1:4222") }

// amqpURL is the RabbitMQ the tests use: IDEMKIT_AMQP_URL, or the one
// scripts/test.sh starts on 127.0.0.1:5672.
func amqpURL() string { return envOr("IDEMKIT_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/") }

// connect returns a JetStream context on a connection of its own.
func connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v (start it with scripts/test.sh, or: nats-server -a 127.0.0.1 -p 4222 -js)", natsURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// newStream creates a stream of its own, capturing <name>.>, with the
// default duplicate window, and deletes it when t ends. It returns the
// stream and a subject it captures.
func newStream(t testing.TB, js jetstream.JetStream) (jetstream.Stream, string) {
	t.Helper()
	name := "IDEMRELAY_" + strings.ToUpper(randHex(6))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return s, name + ".orders"
}

// streamCounts reads every message of s and counts them by Nats-Msg-Id.
func streamCounts(t testing.TB, s jetstream.Stream) (map[string]int, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for got := uint64(0); got < info.State.Msgs; {
		batch, err := c.Fetch(int(min(info.State.Msgs-got, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			counts[m.Headers().Get(jetstream.MsgIDHeader)]++
			n++
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("read %d of the stream's %d messages", got, info.State.Msgs)
		}
		got += uint64(n)
	}
	return counts, info.State.Msgs
}

// dial connects to RabbitMQ.
func dial(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		t.Fatalf("connect to RabbitMQ: %v (start it with scripts/test.sh, or: rabbitmq-server -detached)", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// newQueue declares a queue of its own and deletes it when t ends.
func newQueue(t testing.TB, conn *amqp.Connection) string {
	t.Helper()
	name := "idemrelay-" + randHex(6)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
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

// envChild marks the child process of the crash test.
const envChild = "IDEMRELAY_TEST_CHILD"
