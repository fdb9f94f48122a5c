package idemnats_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemnats"
)

// On a real server: a message whose handler keeps failing, published in
// front of good ones, does not hold them up, and is terminated after a
// bounded number of attempts instead of being redelivered forever.
func TestPoisonMessageIsTerminatedAfterMaxAttemptsAndOthersRun(t *testing.T) {
	js := connect(t)
	s, subject := newStream(t, js)
	c := newConsumer(t, s, 5*time.Second)
	publish(t, js, subject, "poison", jetstream.MsgIDHeader, "poison")
	const good = 15
	for i := range good {
		publish(t, js, subject, "good", jetstream.MsgIDHeader, "good-"+string(rune('a'+i)))
	}
	var poisonRuns, goodRuns atomic.Int64
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "orders", func(_ context.Context, m jetstream.Msg) ([]byte, error) {
		if string(m.Data()) == "poison" {
			poisonRuns.Add(1)
			return nil, errors.New("downstream says no")
		}
		goodRuns.Add(1)
		return nil, nil
	}, idemnats.WithRetryDelay(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.Consume(h.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	waitDrained(t, s) // the poison message is terminated: a work-queue stream drops it
	if n := goodRuns.Load(); n != good {
		t.Fatalf("%d good messages processed, want %d", n, good)
	}
	if n := poisonRuns.Load(); n != idemnats.DefaultMaxAttempts {
		t.Fatalf("poison message ran %d times, want %d", n, idemnats.DefaultMaxAttempts)
	}
}

// On a real server: a handler that panics on one message does not kill
// the consumer: the messages behind it are processed, and the panicking
// one is retried with back-off, reported, then dead-lettered.
func TestPanickingMessageIsRetriedThenDeadLetteredAndOthersRun(t *testing.T) {
	js := connect(t)
	s, subject := newStream(t, js)
	dead, deadSubject := newStream(t, js)
	c := newConsumer(t, s, 5*time.Second)
	publish(t, js, subject, "poison", jetstream.MsgIDHeader, "poison")
	const good = 5
	for i := range good {
		publish(t, js, subject, "good", jetstream.MsgIDHeader, "good-"+string(rune('a'+i)))
	}
	var poisonRuns, goodRuns, panics, exhausted atomic.Int64
	var mu sync.Mutex
	var runsAt []time.Time
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "orders", func(_ context.Context, m jetstream.Msg) ([]byte, error) {
		if string(m.Data()) == "poison" {
			poisonRuns.Add(1)
			mu.Lock()
			runsAt = append(runsAt, time.Now())
			mu.Unlock()
			panic(errors.New("charge: nil map")) // a bug in the handler
		}
		goodRuns.Add(1)
		return nil, nil
	}, idemnats.WithBackoff(100*time.Millisecond, 200*time.Millisecond), idemnats.WithMaxAttempts(4),
		idemnats.WithDeadLetter(js, deadSubject),
		idemnats.WithReport(func(_ context.Context, _ jetstream.Msg, out idemnats.Outcome) {
			if out.Panicked && errors.Is(out.Err, idemnats.ErrPanic) {
				panics.Add(1)
			}
			if out.Exhausted && out.DeadLettered && out.Action == idemnats.Term {
				exhausted.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.Consume(h.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	waitDrained(t, s)
	if n := goodRuns.Load(); n != good {
		t.Fatalf("%d good messages processed, want %d", n, good)
	}
	if p, r, x := poisonRuns.Load(), panics.Load(), exhausted.Load(); p != 4 || r != 4 || x != 1 {
		t.Fatalf("panicking message ran %d times, %d panics and %d exhausted reported; want 4, 4, 1", p, r, x)
	}
	mu.Lock()
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond} {
		if gap := runsAt[i+1].Sub(runsAt[i]); gap < want {
			t.Errorf("retry %d came %v after the previous run, want at least %v", i+1, gap, want)
		}
	}
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := dead.GetLastMsgForSubject(ctx, deadSubject)
	if err != nil {
		t.Fatalf("dead-letter copy: %v", err)
	}
	if string(m.Data) != "poison" || m.Header.Get(idemnats.DeadLetterReasonHeader) != "panic" ||
		m.Header.Get(idemnats.DeadLetterAttemptsHeader) != "4" || m.Header.Get(idemnats.DeadLetterMsgIDHeader) != "poison" ||
		m.Header.Get(idemnats.DeadLetterSubjectHeader) != subject || m.Header.Get(idemnats.DeadLetterSequenceHeader) != "1" {
		t.Fatalf("dead-letter copy %q with headers %v", m.Data, m.Header)
	}
}

// The nak delay grows with the server's delivery count, up to the cap,
// and the delivery that reaches WithMaxAttempts is terminated and
// reported as exhausted.
func TestHandleBacksOffByDeliveryCountThenTerms(t *testing.T) {
	var reported []idemnats.Outcome
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, jetstream.Msg) ([]byte, error) {
		return nil, errors.New("db timeout")
	}, idemnats.WithBackoff(time.Second, 5*time.Second), idemnats.WithMaxAttempts(5),
		idemnats.WithReport(func(_ context.Context, _ jetstream.Msg, out idemnats.Outcome) { reported = append(reported, out) }))
	if err != nil {
		t.Fatal(err)
	}
	for delivered, want := range []time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second} {
		if delivered == 0 {
			continue
		}
		m := newFakeMsg("m")
		m.delivered = uint64(delivered)
		if out := h.HandleContext(context.Background(), m); out.Action != idemnats.Nak || out.Delay != want || m.delay != want || out.Attempt != delivered {
			t.Fatalf("delivery %d: %+v, nak after %v; want a nak after %v", delivered, out, m.delay, want)
		}
	}
	m := newFakeMsg("m")
	m.delivered = 5
	out := h.HandleContext(context.Background(), m)
	if out.Action != idemnats.Term || !out.Exhausted || out.DeadLettered || out.Err == nil || m.sent()[0] != "term" {
		t.Fatalf("last delivery: %+v, sent %v; want an exhausted term", out, m.sent())
	}
	if len(reported) != 5 || !reported[4].Exhausted {
		t.Fatalf("reported %+v, want 5 outcomes, the last exhausted", reported)
	}
}
