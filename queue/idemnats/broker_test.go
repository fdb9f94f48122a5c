package idemnats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsURL is the JetStream server the broker tests use: IDEMKIT_NATS_URL,
// or the one scripts/test.sh starts on 127.0.0.1:4222.
func natsURL() string {
	if u := os.Getenv("IDEMKIT_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// connect returns a JetStream context on the test server, or fails the
// test saying how to start one.
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

// newStream creates a work-queue stream of its own for the test, on
// subject <name>.orders, and deletes it when the test ends.
func newStream(t testing.TB, js jetstream.JetStream) (stream jetstream.Stream, subject string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "IDEMNATS_" + strings.ToUpper(hex.EncodeToString(b[:]))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      name,
		Subjects:  []string{name + ".orders"},
		Retention: jetstream.WorkQueuePolicy, // acked messages leave the stream
		Storage:   jetstream.MemoryStorage,
	})
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

// newConsumer creates a durable pull consumer with explicit acks.
func newConsumer(t testing.TB, s jetstream.Stream, ackWait time.Duration) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   "workers",
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// publish publishes body on subject with the given headers (name, value
// pairs).
func publish(t testing.TB, js jetstream.JetStream, subject, body string, hdr ...string) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// drained reports whether every message of s was acknowledged (a
// work-queue stream removes acknowledged messages).
func drained(t testing.TB, s jetstream.Stream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
