package idemrelay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
	"github.com/idemkit/idemkit/queue/idemrelay"
)

// TestAMQPRelaysRaceAtLeastOnceDedupedByIdemamqp: six relays, two of
// which die between RabbitMQ's confirms and the removal of their first
// batch, race over one outbox on each database. RabbitMQ delivers every
// committed event, and each abandoned one once more per abandonment, with
// the same message-id; a consumer built with idemamqp runs each event's effect
// exactly once, and no event of a rolled-back transaction arrives.
func TestAMQPRelaysRaceAtLeastOnceDedupedByIdemamqp(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newOutbox(t, b)
			conn := dial(t)
			queue := newQueue(t, conn)
			const events = 300
			ids := enqueue(t, b, s, queue, 0, events)
			var lost abandoned
			var relays []*idemrelay.Relay
			for i := range 6 {
				pub, err := idemrelay.NewAMQP(dial(t), "")
				if err != nil {
					t.Fatal(err)
				}
				opts := []idemrelay.Option{idemrelay.WithBatchSize(25), idemrelay.WithPollInterval(10 * time.Millisecond)}
				if i < 2 {
					opts = append(opts, dieAfterFirstPublish(&lost))
				}
				r, err := idemrelay.New(s, pub, opts...)
				if err != nil {
					t.Fatal(err)
				}
				relays = append(relays, r)
			}
			sum := runRelays(t, s, relays)
			if lost.len() == 0 || sum.Published != events {
				t.Fatalf("abandoned %d, removed %d; want some abandoned, %d removed", lost.len(), sum.Published, events)
			}

			deliveries, effects := consumeOnce(t, conn, queue, events+lost.total())
			if len(deliveries) != events {
				t.Fatalf("%d distinct message-ids delivered, want %d", len(deliveries), events)
			}
			for id, n := range deliveries {
				switch {
				case !ids[id]:
					t.Errorf("message %s delivered, but never committed", id)
				case effects[id] != 1:
					t.Errorf("message %s: effect ran %d times, want once", id, effects[id])
				case n != 1+lost.times(id):
					t.Errorf("message %s delivered %d times, abandoned %d times", id, n, lost.times(id))
				}
			}
			t.Logf("%s: %d events, %d deliveries (%d abandoned after their confirm and re-published), %d effects, each once",
				b.name, events, events+lost.total(), lost.total(), len(effects))
		})
	}
}

// consumeOnce consumes want deliveries from queue through an idemamqp
// Handler (keyed by message-id, its default) and returns the deliveries
// and the effects counted per message-id; then it checks the queue is
// empty.
func consumeOnce(t *testing.T, conn *amqp.Connection, queue string, want int) (deliveries, effects map[string]int) {
	t.Helper()
	var mu sync.Mutex
	deliveries, effects = map[string]int{}, map[string]int{}
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		mu.Lock()
		effects[d.MessageId]++
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for got := 0; got < want; got++ {
		select {
		case d := <-ds:
			deliveries[d.MessageId]++
			if out := h.Handle(context.Background(), d); out.Err != nil || out.Action != idemamqp.Ack {
				t.Fatalf("delivery of %s: %+v, want acked", d.MessageId, out)
			}
		case <-timeout:
			t.Fatalf("%d of %d deliveries after a minute", got, want)
		}
	}
	select {
	case d := <-ds:
		t.Fatalf("a delivery beyond the %d expected: %s", want, d.MessageId)
	case <-time.After(200 * time.Millisecond):
	}
	return deliveries, effects
}
