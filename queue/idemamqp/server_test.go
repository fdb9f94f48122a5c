package idemamqp_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// On a real broker: a business key published twice runs once, in a batch,
// and every message is acked (none is back in the queue once the channel
// closes).
func TestHandleBatchOnBrokerRunsEachKeyOnceAndDrains(t *testing.T) {
	conn := dial(t)
	queue := newQueue(t, conn)
	pub := channel(t, conn)
	for i, id := range []string{"o-1", "o-2", "o-1", "o-3", "o-2"} {
		publish(t, pub, queue, "pub-"+string(rune('a'+i)), id, "Order-Id", id)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		effects[string(d.Body)]++
		return nil, nil
	}, idemamqp.WithKey(idemamqp.HeaderKey("Order-Id")))
	if err != nil {
		t.Fatal(err)
	}
	ch, ds := consume(t, conn, queue, 10)
	var batch []amqp.Delivery
	timeout := time.After(20 * time.Second)
	for len(batch) < 5 {
		select {
		case d := <-ds:
			batch = append(batch, d)
		case <-timeout:
			t.Fatalf("%d of 5 deliveries arrived", len(batch))
		}
	}
	for i, out := range h.HandleBatch(context.Background(), batch) {
		if out.Action != idemamqp.Ack || out.Err != nil {
			t.Errorf("delivery %d: %+v, want ack", i, out)
		}
	}
	_ = ch.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(effects) != 3 || effects["o-1"] != 1 || effects["o-2"] != 1 || effects["o-3"] != 1 {
		t.Fatalf("effects %v, want o-1, o-2, o-3 once each", effects)
	}
	if n := ready(t, conn, queue); n != 0 {
		t.Fatalf("%d messages back in the queue: not acknowledged", n)
	}
}

// On a real broker: the channel of a running delivery closes (as when the
// broker's consumer timeout fires); the redelivery, flagged Redelivered,
// finds the key in progress and is requeued after the retry hint; the
// first delivery records its result but cannot ack on its closed channel;
// the next redelivery is acked as a replay. The effect runs once.
func TestChannelClosedDuringRunRedeliversAndReplays(t *testing.T) {
	conn := dial(t)
	queue := newQueue(t, conn)
	publish(t, channel(t, conn), queue, "m-1", "body")
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", func(context.Context, *amqp.Delivery) ([]byte, error) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		return nil, nil
	}, idemamqp.WithEngineOptions(idemkit.WithRetryHint(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ch1, ds1 := consume(t, conn, queue, 1)
	first := make(chan idemamqp.Outcome, 1)
	go func() { first <- h.Handle(context.Background(), <-ds1) }()
	<-started
	_ = ch1.Close() // the broker requeues the unacked delivery

	ch2, ds2 := consume(t, conn, queue, 1)
	defer ch2.Close()
	var outs []idemamqp.Outcome
	for d := range ds2 {
		out := h.Handle(context.Background(), d)
		outs = append(outs, out)
		if out.Action == idemamqp.Requeue && len(outs) == 1 {
			close(release) // the first delivery finishes while its copy is requeued
			if f := <-first; f.Action != idemamqp.Ack || !f.Ran || !errors.Is(f.Err, amqp.ErrClosed) {
				t.Fatalf("first delivery: %+v, want an ack that fails on the closed channel", f)
			}
		}
		if out.Action == idemamqp.Ack {
			break
		}
		if len(outs) > 50 {
			t.Fatalf("no ack after %d redeliveries: %+v", len(outs), outs)
		}
	}
	if o := outs[0]; o.Action != idemamqp.Requeue || !o.Redelivered || !errors.Is(o.Err, idemkit.ErrInProgress) {
		t.Fatalf("redelivery during the run: %+v, want a requeue", o)
	}
	if last := outs[len(outs)-1]; !last.Replayed || !last.Redelivered {
		t.Fatalf("final delivery: %+v, want a replayed ack", last)
	}
	_ = ch2.Close()
	if runs.Load() != 1 {
		t.Fatalf("effect ran %d times, want 1", runs.Load())
	}
	if n := ready(t, conn, queue); n != 0 {
		t.Fatalf("%d messages back in the queue: not acknowledged", n)
	}
}

// On a real broker: many copies of one message ID, raced by concurrent
// single and batch consumers (Begin against BeginBatch) while the effect
// runs, run the effect once; every copy is acked in the end.
func TestRacingCopiesOfOneKeyOnBrokerRunOnce(t *testing.T) {
	conn := dial(t)
	queue := newQueue(t, conn)
	pub := channel(t, conn)
	const copies = 40
	for range copies {
		publish(t, pub, queue, "m-1", "order")
	}
	var runs, acked atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", func(context.Context, *amqp.Delivery) ([]byte, error) {
		runs.Add(1)
		time.Sleep(300 * time.Millisecond) // the copies find the key in progress meanwhile
		return []byte("charged"), nil
	}, idemamqp.WithEngineOptions(idemkit.WithRetryHint(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	count := func(outs ...idemamqp.Outcome) {
		for _, out := range outs {
			if out.Action == idemamqp.Ack {
				acked.Add(1)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var chans []*amqp.Channel
	for w := range 4 {
		ch, ds := consume(t, conn, queue, 8)
		chans = append(chans, ch)
		wg.Go(func() {
			for {
				var d amqp.Delivery
				select {
				case <-ctx.Done():
					return
				case d = <-ds:
				}
				if w%2 == 0 {
					count(h.Handle(ctx, d))
					continue
				}
				batch := []amqp.Delivery{d}
			fill:
				for len(batch) < 8 {
					select {
					case d := <-ds:
						batch = append(batch, d)
					default:
						break fill
					}
				}
				count(h.HandleBatch(ctx, batch)...)
			}
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for acked.Load() < copies && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for _, ch := range chans {
		_ = ch.Close()
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times for %d copies of one message ID, want 1", n, copies)
	}
	if a, n := acked.Load(), ready(t, conn, queue); a != copies || n != 0 {
		t.Fatalf("%d of %d copies acked, %d back in the queue", a, copies, n)
	}
}
