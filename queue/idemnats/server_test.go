package idemnats_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemnats"
)

// On a real server: a fetched batch with a business key published twice
// runs once, and every message is acked (the work-queue stream empties).
func TestFetchOnServerRunsEachKeyOnceAndDrains(t *testing.T) {
	js := connect(t)
	s, subject := newStream(t, js)
	c := newConsumer(t, s, 5*time.Second)
	for _, id := range []string{"o-1", "o-2", "o-1", "o-3", "o-2"} {
		publish(t, js, subject, id, "Order-Id", id)
	}
	effects := map[string]int{}
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "orders", func(_ context.Context, m jetstream.Msg) ([]byte, error) {
		effects[string(m.Data())]++
		return nil, nil
	}, idemnats.WithKey(idemnats.HeaderKey("Order-Id")))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := h.Fetch(context.Background(), c, 10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var ran, replayed int
	for _, out := range outs {
		if out.Action != idemnats.Ack || out.Err != nil {
			t.Errorf("outcome %+v, want ack", out)
		}
		if out.Ran {
			ran++
		}
		if out.Replayed {
			replayed++
		}
	}
	if len(outs) != 5 || ran != 3 || replayed != 2 || len(effects) != 3 {
		t.Fatalf("%d outcomes, %d ran, %d replayed, effects %v; want 5, 3, 2, once each", len(outs), ran, replayed, effects)
	}
	for id, n := range effects {
		if n != 1 {
			t.Errorf("effect of %s ran %d times", id, n)
		}
	}
	waitDrained(t, s)
}

// On a real server: a delivery outliving the ack wait is redelivered while
// the first still runs; the redelivery is nakked with the engine's retry
// hint, and once the first completes a later redelivery is acked as a
// replay.
func TestConsumeRedeliveryDuringRunIsNakkedThenReplayed(t *testing.T) {
	js := connect(t)
	s, subject := newStream(t, js)
	c := newConsumer(t, s, 300*time.Millisecond)
	publish(t, js, subject, "slow", jetstream.MsgIDHeader, "m-1")
	var runs, naks, replays atomic.Int64
	release := make(chan struct{})
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "orders", func(context.Context, jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		<-release
		return nil, nil
	}, idemnats.WithEngineOptions(idemkit.WithRetryHint(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		go func() { // the first delivery blocks; redeliveries must reach the handler meanwhile
			out := h.HandleContext(context.Background(), m)
			switch {
			case out.Action == idemnats.Nak && out.Delay > 0 && out.Delay <= 100*time.Millisecond:
				if naks.Add(1) == 2 {
					close(release) // two redeliveries nakked while the first ran
				}
			case out.Replayed:
				replays.Add(1)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	waitDrained(t, s)
	if runs.Load() != 1 || naks.Load() < 2 {
		t.Fatalf("runs %d, in-progress naks %d; want 1 run and at least 2 naks", runs.Load(), naks.Load())
	}
}

// waitDrained waits, bounded, until every message of s is acknowledged.
func waitDrained(t *testing.T, s jetstream.Stream) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n := drained(t, s); n != 0; n = drained(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still in the stream", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// On a real server: many copies of one business key, raced by concurrent
// Consume handlers and Fetch batches (Begin against BeginBatch) under an
// ack wait shorter than the effect, run the effect once, and every copy is
// acked in the end.
func TestRacingCopiesOfOneKeyOnServerRunOnce(t *testing.T) {
	js := connect(t)
	s, subject := newStream(t, js)
	c := newConsumer(t, s, 300*time.Millisecond)
	const copies = 40
	for range copies {
		publish(t, js, subject, "order", "Order-Id", "o-1")
	}
	var runs atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "orders", func(context.Context, jetstream.Msg) ([]byte, error) {
		runs.Add(1)
		time.Sleep(500 * time.Millisecond) // outlives the ack wait: the server redelivers meanwhile
		return []byte("charged"), nil
	}, idemnats.WithKey(idemnats.HeaderKey("Order-Id")),
		idemnats.WithEngineOptions(idemkit.WithRetryHint(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait: the fetch loops end with ctx
	for range 2 {
		cc, err := c.Consume(func(m jetstream.Msg) { wg.Go(func() { h.HandleContext(ctx, m) }) })
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
	}
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = h.Fetch(ctx, c, 8, jetstream.FetchMaxWait(100*time.Millisecond))
			}
		})
	}
	waitDrained(t, s)
	if n := runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times for %d copies of one key, want 1", n, copies)
	}
}
