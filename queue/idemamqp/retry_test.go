package idemamqp_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// On a real broker, prefetch 1: a message whose handler keeps failing, in
// front of good ones, is rejected to the queue's dead-letter exchange
// after a bounded number of attempts, and the good ones are processed.
func TestPoisonMessageIsDeadLetteredAfterMaxAttemptsAndOthersRun(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	pub := channel(t, conn)
	publish(t, pub, queue, "poison", "poison")
	const good = 15
	for i := range good {
		publish(t, pub, queue, "good-"+string(rune('a'+i)), "good")
	}
	var poisonRuns, goodRuns atomic.Int64
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		if string(d.Body) == "poison" {
			poisonRuns.Add(1)
			return nil, errors.New("downstream says no")
		}
		goodRuns.Add(1)
		return nil, nil
	}, idemamqp.WithRetryDelay(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ch, ds := consume(t, conn, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ds) }()
	deadline := time.Now().Add(10 * time.Second)
	for (goodRuns.Load() < good || ready(t, conn, dead) < 1) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-served
	_ = ch.Close()
	if g, p, d := goodRuns.Load(), poisonRuns.Load(), ready(t, conn, dead); g != good || p != idemamqp.DefaultMaxAttempts || d != 1 {
		t.Fatalf("%d good messages processed, poison ran %d times, %d dead-lettered; want %d, %d, 1", g, p, d, good, idemamqp.DefaultMaxAttempts)
	}
	if n := ready(t, conn, queue); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
}

// On a real broker, two Serve loops on a channel with prefetch 2: while
// one holds a panicking message for its back-off, the other processes the
// good ones behind it; the panicking message is retried, reported, then
// dead-lettered, and the consumers keep running.
func TestPanickingMessageIsRetriedThenDeadLetteredAndOthersRun(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	pub := channel(t, conn)
	publish(t, pub, queue, "poison", "poison")
	const good = 15
	for i := range good {
		publish(t, pub, queue, "good-"+string(rune('a'+i)), "good")
	}
	var poisonRuns, goodRuns, panics, exhausted atomic.Int64
	firstPanic := make(chan struct{})
	goodDone := make(chan time.Time, 1)
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		if string(d.Body) == "poison" {
			if poisonRuns.Add(1) == 1 {
				close(firstPanic)
			}
			panic(errors.New("charge: nil map")) // a bug in the handler
		}
		if goodRuns.Add(1) == good {
			goodDone <- time.Now()
		}
		return nil, nil
	}, idemamqp.WithBackoff(300*time.Millisecond, 600*time.Millisecond), idemamqp.WithMaxAttempts(3),
		idemamqp.WithReport(func(_ context.Context, _ *amqp.Delivery, out idemamqp.Outcome) {
			if out.Panicked && errors.Is(out.Err, idemamqp.ErrPanic) {
				panics.Add(1)
			}
			if out.Exhausted && out.Action == idemamqp.Reject {
				exhausted.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ch, ds := consume(t, conn, queue, 2)
	ctx, cancel := context.WithCancel(context.Background())
	var served sync.WaitGroup
	for range 2 {
		served.Go(func() { _ = h.Serve(ctx, ds) })
	}
	<-firstPanic
	start := time.Now()
	select {
	case done := <-goodDone:
		if took := done.Sub(start); took >= 300*time.Millisecond {
			t.Errorf("good messages took %v after the first panic, longer than its back-off: held up", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d good messages processed", goodRuns.Load(), good)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ready(t, conn, dead) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	served.Wait()
	_ = ch.Close()
	if p, r, x, d := poisonRuns.Load(), panics.Load(), exhausted.Load(), ready(t, conn, dead); p != 3 || r != 3 || x != 1 || d != 1 {
		t.Fatalf("panicking message ran %d times, %d panics and %d exhausted reported, %d dead-lettered; want 3, 3, 1, 1", p, r, x, d)
	}
	if n := ready(t, conn, queue); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
}

// The hold grows with the attempt, counted from a quorum queue's
// x-delivery-count, or by the Handler for a queue without one; the
// attempt that reaches WithMaxAttempts is rejected and reported.
func TestHandleBacksOffByAttemptThenRejects(t *testing.T) {
	var reported []idemamqp.Outcome
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, *amqp.Delivery) ([]byte, error) {
		return nil, errors.New("db timeout")
	}, idemamqp.WithBackoff(time.Millisecond, 3*time.Millisecond), idemamqp.WithMaxAttempts(4),
		idemamqp.WithReport(func(_ context.Context, _ *amqp.Delivery, out idemamqp.Outcome) { reported = append(reported, out) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for attempt, want := range []time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 3: 3 * time.Millisecond} {
		if attempt == 0 {
			continue
		}
		d, a := fakeDelivery("counted")
		if out := h.Handle(ctx, d); out.Action != idemamqp.Requeue || out.Delay != want || out.Attempt != attempt {
			t.Fatalf("attempt %d: %+v, sent %v; want a requeue after %v", attempt, out, a.got(), want)
		}
	}
	d, a := fakeDelivery("counted")
	if out := h.Handle(ctx, d); out.Action != idemamqp.Reject || !out.Exhausted || out.Attempt != 4 || a.got()[0] != "reject" {
		t.Fatalf("last attempt: %+v, sent %v; want an exhausted reject", out, a.got())
	}
	d, _ = fakeDelivery("quorum")
	d.Headers["x-delivery-count"] = int64(3) // three earlier deliveries
	if out := h.Handle(ctx, d); out.Action != idemamqp.Reject || !out.Exhausted || out.Attempt != 4 {
		t.Fatalf("fourth delivery from a quorum queue: %+v, want an exhausted reject", out)
	}
	if len(reported) != 5 {
		t.Fatalf("%d outcomes reported, want 5", len(reported))
	}
}
