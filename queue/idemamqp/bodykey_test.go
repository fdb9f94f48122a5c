package idemamqp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// bodyDelivery is a fake delivery with body and a MessageId of its own.
func bodyDelivery(id, body string) amqp.Delivery {
	d, _ := fakeDelivery(id)
	d.Body = []byte(body)
	return d
}

func TestBodyKeyBadMessagesAreRejected(t *testing.T) {
	var runs atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "payments", func(context.Context, *amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	}, idemamqp.WithBodyKey("data.txn"))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"data":{}}`, `{"data":{"txn":[1]}}`, `{"data":{"txn":true}}`, `{"data":{"txn":""}}`,
		`{"data":{"txn":"x"}`, `{"data":{"txn":"a","txn":"b"}}`, `<txn>1</txn>`, ``} {
		out := h.Handle(context.Background(), bodyDelivery("m-"+body, body))
		if out.Action != idemamqp.Reject || !errors.Is(out.Err, idemkit.ErrInvalid) {
			t.Errorf("%q: %+v, want reject with ErrInvalid", body, out)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("%d bad messages ran", runs.Load())
	}
}

func TestBodyKeyWithInclude(t *testing.T) {
	var runs atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "payments", func(context.Context, *amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	}, idemamqp.WithBodyKey("txn"), idemamqp.WithInclude("amount", "currency"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := h.Handle(ctx, bodyDelivery("a", `{"txn":"T","amount":5,"currency":"EUR","sent":1}`))
	again := h.Handle(ctx, bodyDelivery("b", `{"currency":"EUR","txn":"T","amount":5.0,"sent":2}`))
	other := h.Handle(ctx, bodyDelivery("c", `{"txn":"T","amount":5,"currency":"USD"}`))
	if !first.Ran || !again.Replayed || other.Action != idemamqp.Reject || !errors.Is(other.Err, idemkit.ErrMismatch) || runs.Load() != 1 {
		t.Fatalf("first %+v, again %+v, other %+v, runs %d", first, again, other, runs.Load())
	}
}

// On a real broker: each event is published many times under distinct
// MessageIds and consumed by several channels at once: each event's
// effect runs once and every copy is acked.
func TestBodyKeyOnBrokerRunsEachEventOnce(t *testing.T) {
	conn := dial(t)
	queue := newQueue(t, conn)
	pub := channel(t, conn)
	const events, copies = 4, 10
	for i := range copies {
		for e := range events {
			publish(t, pub, queue, fmt.Sprintf("m-%d-%d", e, i), fmt.Sprintf(`{"event":{"id":"evt-%d"},"sent_at":%d}`, e, i))
		}
	}
	var mu sync.Mutex
	effects := map[string]int{}
	var acked atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "payments", func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		effects[string(d.Body[:len(`{"event":{"id":"evt-0"}`)])]++
		return nil, nil
	}, idemamqp.WithBodyKey("event.id"), idemamqp.WithVolatile("sent_at"),
		idemamqp.WithEngineOptions(idemkit.WithRetryHint(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var chans []*amqp.Channel
	for range 4 {
		ch, ds := consume(t, conn, queue, 8)
		chans = append(chans, ch)
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d := <-ds:
					if out := h.Handle(ctx, d); out.Action == idemamqp.Ack {
						acked.Add(1)
					}
				}
			}
		})
	}
	testkit.WaitFor(t, "every copy acked", func() bool { return acked.Load() == events*copies })
	cancel()
	wg.Wait()
	for _, ch := range chans {
		_ = ch.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(effects) != events {
		t.Fatalf("effects %v, want %d events", effects, events)
	}
	for e, n := range effects {
		if n != 1 {
			t.Errorf("%s ran %d times", e, n)
		}
	}
	if n := ready(t, conn, queue); n != 0 {
		t.Fatalf("%d messages back in the queue", n)
	}
}
