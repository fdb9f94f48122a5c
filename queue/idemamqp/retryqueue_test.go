package idemamqp_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// retryHandler builds a Handler with delay queues for queue on conn, and
// closes it and deletes its delay queues when the test ends.
func retryHandler(t *testing.T, e *idemkit.Engine, conn *amqp.Connection, queue string, fn idemamqp.Func, opts ...idemamqp.Option) *idemamqp.Handler {
	t.Helper()
	h, err := idemamqp.NewHandler(e, "orders", fn, append(opts, idemamqp.WithRetryQueue(conn, queue))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close handler: %v", err)
		}
		admin, err := amqp.Dial(amqpURL()) // conn may be closed by now
		if err != nil {
			t.Errorf("connect to delete the delay queues: %v", err)
			return
		}
		defer admin.Close()
		for _, q := range h.RetryQueues() {
			deleteQueue(t, admin, q)
		}
	})
	return h
}

// left returns the number of messages waiting in queue, 0 for a delay
// queue never declared.
func left(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// outcomes collects reported outcomes, safe for concurrent use.
type outcomes struct {
	mu  sync.Mutex
	all []idemamqp.Outcome
}

func (o *outcomes) report(_ context.Context, d *amqp.Delivery, out idemamqp.Outcome) {
	if d.MessageId != "poison" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all = append(o.all, out)
}

func (o *outcomes) got() []idemamqp.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.all)
}

// waitFor polls cond every 10 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// publishPoisonAndGood publishes a message with MessageId "poison", then
// n good ones.
func publishPoisonAndGood(t *testing.T, conn *amqp.Connection, queue string, n int) {
	t.Helper()
	pub := channel(t, conn)
	publish(t, pub, queue, "poison", "poison")
	for i := range n {
		publish(t, pub, queue, fmt.Sprintf("good-%d", i), "good")
	}
}

// failPoison is a handler that fails the message "poison" and counts the
// runs of both kinds.
func failPoison(poisonRuns, goodRuns *atomic.Int64) idemamqp.Func {
	return func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		if d.MessageId == "poison" {
			poisonRuns.Add(1)
			return nil, errors.New("downstream says no")
		}
		goodRuns.Add(1)
		return nil, nil
	}
}

// One Serve loop, prefetch 1, production-like back-off (5 s first delay):
// the poison message waits out its delay in a delay queue, not in the
// loop, so the 15 good messages behind it are processed at once.
func TestPoisonWaitsInADelayQueueWhileGoodOnesRun(t *testing.T) {
	conn := dial(t)
	queue, _ := newDeadLetteredQueue(t, conn)
	const good = 15
	publishPoisonAndGood(t, conn, queue, good)
	var poisonRuns, goodRuns atomic.Int64
	var rep outcomes
	h := retryHandler(t, testkit.NewEngine(t), conn, queue, failPoison(&poisonRuns, &goodRuns),
		idemamqp.WithBackoff(5*time.Second, time.Minute), idemamqp.WithReport(rep.report))
	ch, ds := consume(t, conn, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	start := time.Now()
	go func() { served <- h.Serve(ctx, ds) }()
	ok := waitFor(4*time.Second, func() bool { return goodRuns.Load() == good })
	took := time.Since(start)
	cancel()
	<-served
	_ = ch.Close()
	if !ok || took > 2*time.Second {
		t.Fatalf("%d of %d good messages processed in %v with the poison in front (first delay 5 s), want all within about a second", goodRuns.Load(), good, took)
	}
	t.Logf("%d good messages processed in %v", good, took)
	delayQueue := idemamqp.RetryQueueName(queue, 5*time.Second)
	if p, w, n := poisonRuns.Load(), ready(t, conn, delayQueue), ready(t, conn, queue); p != 1 || w != 1 || n != 0 {
		t.Fatalf("poison ran %d times, %d message(s) in %s, %d in the queue; want 1, 1, 0", p, w, delayQueue, n)
	}
	if out := rep.got(); len(out) != 1 || out[0].Action != idemamqp.Republish || out[0].Delay != 5*time.Second || out[0].Attempt != 1 || out[0].Err == nil {
		t.Fatalf("poison outcomes %+v, want one republish after 5s at attempt 1 with the handler's error", out)
	}
}

// With short delays the poison message goes through a delay queue per
// back-off step and reaches the dead-letter queue after exactly
// MaxAttempts runs, carrying its attempt count.
func TestPoisonIsDeadLetteredAfterMaxAttemptsThroughDelayQueues(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	const good = 15
	publishPoisonAndGood(t, conn, queue, good)
	var poisonRuns, goodRuns atomic.Int64
	var rep outcomes
	h := retryHandler(t, testkit.NewEngine(t), conn, queue, failPoison(&poisonRuns, &goodRuns),
		idemamqp.WithBackoff(20*time.Millisecond, 80*time.Millisecond), idemamqp.WithMaxAttempts(4), idemamqp.WithReport(rep.report))
	ch, ds := consume(t, conn, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ds) }()
	ok := waitFor(10*time.Second, func() bool { return goodRuns.Load() == good && ready(t, conn, dead) == 1 })
	cancel()
	<-served
	_ = ch.Close()
	if !ok || poisonRuns.Load() != 4 {
		t.Fatalf("%d good processed, poison ran %d times, %d dead-lettered; want %d, 4, 1", goodRuns.Load(), poisonRuns.Load(), ready(t, conn, dead), good)
	}
	out := rep.got()
	want := []struct {
		action idemamqp.Action
		delay  time.Duration
	}{{idemamqp.Republish, 20 * time.Millisecond}, {idemamqp.Republish, 40 * time.Millisecond}, {idemamqp.Republish, 80 * time.Millisecond}, {idemamqp.Reject, 0}}
	if len(out) != len(want) {
		t.Fatalf("poison outcomes %+v, want %d", out, len(want))
	}
	for i, w := range want {
		if o := out[i]; o.Action != w.action || o.Delay != w.delay || o.Attempt != i+1 || o.Exhausted != (i == 3) {
			t.Fatalf("poison attempt %d: %+v, want %v after %v", i+1, o, w.action, w.delay)
		}
	}
	get := channel(t, conn)
	m, ok, err := get.Get(dead, true)
	if err != nil || !ok {
		t.Fatalf("get the dead-lettered message: %v, %v", ok, err)
	}
	if m.MessageId != "poison" || string(m.Body) != "poison" || m.Headers[idemamqp.AttemptHeader] != int64(3) {
		t.Fatalf("dead-lettered message %q %q headers %v, want poison with %s 3", m.MessageId, m.Body, m.Headers, idemamqp.AttemptHeader)
	}
	for _, q := range append(h.RetryQueues(), queue) {
		if n := left(t, conn, q); n != 0 {
			t.Fatalf("%d message(s) left in %s", n, q)
		}
	}
}

// The attempt count travels with the message: a second consumer, on
// another connection and with a Handler of its own, continues it.
func TestAttemptCountCarriesOverToAnotherConsumer(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	publish(t, channel(t, conn), queue, "poison", "poison")
	e := testkit.NewEngine(t)
	var poisonRuns, goodRuns atomic.Int64
	var rep outcomes
	opts := []idemamqp.Option{idemamqp.WithBackoff(20*time.Millisecond, 20*time.Millisecond), idemamqp.WithMaxAttempts(3), idemamqp.WithReport(rep.report)}

	first := dial(t)
	h1 := retryHandler(t, e, first, queue, failPoison(&poisonRuns, &goodRuns), opts...)
	ch1, ds1 := consume(t, first, queue, 1)
	if out := h1.Handle(context.Background(), <-ds1); out.Action != idemamqp.Republish || out.Attempt != 1 {
		t.Fatalf("first consumer: %+v, want a republish at attempt 1", out)
	}
	_ = ch1.Close()
	_ = first.Close()

	second := dial(t)
	h2 := retryHandler(t, e, second, queue, failPoison(&poisonRuns, &goodRuns), opts...)
	ch2, ds2 := consume(t, second, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h2.Serve(ctx, ds2) }()
	ok := waitFor(10*time.Second, func() bool { return ready(t, conn, dead) == 1 })
	cancel()
	<-served
	_ = ch2.Close()
	var attempts []int
	for _, o := range rep.got() {
		attempts = append(attempts, o.Attempt)
	}
	if !ok || poisonRuns.Load() != 3 || !slices.Equal(attempts, []int{1, 2, 3}) {
		t.Fatalf("poison ran %d times (attempts %v), dead-lettered %v; want 3 runs, attempts [1 2 3], dead-lettered", poisonRuns.Load(), attempts, ok)
	}
}

// On a quorum queue the attempt is the larger of the broker's
// x-delivery-count and the copy's AttemptHeader: deliveries requeued by
// another consumer count, and so do attempts carried by a copy.
func TestAttemptOnAQuorumQueueIsTheLargerCount(t *testing.T) {
	conn := dial(t)
	dead := newQueue(t, conn)
	queue := dead + "-quorum"
	args := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead}
	if _, err := channel(t, conn).QueueDeclare(queue, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueue(t, conn, queue) })
	publish(t, channel(t, conn), queue, "poison", "poison")
	raw := channel(t, conn)
	for range 2 { // another consumer gives it back twice: x-delivery-count 2
		var m amqp.Delivery
		var err error
		if !waitFor(5*time.Second, func() bool {
			var ok bool
			m, ok, err = raw.Get(queue, false)
			return ok || err != nil
		}) || err != nil {
			t.Fatalf("get the message from the quorum queue: %v", err)
		}
		if err := m.Nack(false, true); err != nil {
			t.Fatal(err)
		}
	}
	var poisonRuns, goodRuns atomic.Int64
	var rep outcomes
	h := retryHandler(t, testkit.NewEngine(t), conn, queue, failPoison(&poisonRuns, &goodRuns),
		idemamqp.WithBackoff(20*time.Millisecond, 20*time.Millisecond), idemamqp.WithMaxAttempts(4), idemamqp.WithReport(rep.report))
	ch, ds := consume(t, conn, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ds) }()
	ok := waitFor(10*time.Second, func() bool { return ready(t, conn, dead) == 1 })
	cancel()
	<-served
	_ = ch.Close()
	out := rep.got()
	if !ok || len(out) != 2 || out[0].Action != idemamqp.Republish || out[0].Attempt != 3 || out[1].Action != idemamqp.Reject || out[1].Attempt != 4 {
		t.Fatalf("poison outcomes %+v (dead-lettered %v), want a republish at attempt 3 (x-delivery-count 2), then a reject at attempt 4 (%s 3)", out, ok, idemamqp.AttemptHeader)
	}
}

// A delay queue that cannot take the copy (declared by someone else with
// other arguments) loses nothing: the delivery is requeued, not acked, the
// failure is reported, and the message is still dead-lettered after its
// attempts.
func TestDeliveryIsRequeuedWhenItsCopyCannotBePublished(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	publish(t, channel(t, conn), queue, "poison", "poison")
	var poisonRuns, goodRuns atomic.Int64
	var rep outcomes
	h := retryHandler(t, testkit.NewEngine(t), conn, queue, failPoison(&poisonRuns, &goodRuns),
		idemamqp.WithBackoff(20*time.Millisecond, 20*time.Millisecond), idemamqp.WithMaxAttempts(3), idemamqp.WithReport(rep.report))
	if _, err := channel(t, conn).QueueDeclare(h.RetryQueues()[0], true, false, false, false, nil); err != nil { // no TTL, no dead-letter
		t.Fatal(err)
	}
	ch, ds := consume(t, conn, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ds) }()
	ok := waitFor(10*time.Second, func() bool { return ready(t, conn, dead) == 1 })
	cancel()
	<-served
	_ = ch.Close()
	out := rep.got()
	if !ok || len(out) != 3 {
		t.Fatalf("poison outcomes %+v (dead-lettered %v), want 2 requeues and a reject", out, ok)
	}
	for _, o := range out[:2] {
		if o.Action != idemamqp.Requeue || o.Err == nil || !strings.Contains(o.Err.Error(), "republish") {
			t.Fatalf("outcome %+v, want a requeue reporting the failed republish", o)
		}
	}
	if n := ready(t, conn, h.RetryQueues()[0]); n != 0 {
		t.Fatalf("%d copies in the conflicting queue, want 0", n)
	}
}

// Many Serve loops on two connections, duplicate publications, and a
// handler that fails the first run of every key: each key's effect
// succeeds exactly once, and every message ends acked.
func TestConcurrentServeLoopsWithDelayQueuesRunEachKeyOnce(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	const keys = 200
	pub := channel(t, conn)
	for i := range keys {
		id := fmt.Sprintf("order-%d", i)
		publish(t, pub, queue, id, "order")
		if i%5 == 0 {
			publish(t, pub, queue, id, "order") // published twice
		}
	}
	var mu sync.Mutex
	runs, succeeded := map[string]int{}, map[string]int{}
	fn := func(_ context.Context, d *amqp.Delivery) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		runs[d.MessageId]++
		if runs[d.MessageId] == 1 {
			return nil, errors.New("first try times out")
		}
		succeeded[d.MessageId]++
		return nil, nil
	}
	e := testkit.NewEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	var served sync.WaitGroup
	var chans []*amqp.Channel
	var handlers []*idemamqp.Handler
	var republished atomic.Int64
	count := idemamqp.WithReport(func(_ context.Context, _ *amqp.Delivery, out idemamqp.Outcome) {
		if out.Action == idemamqp.Republish {
			republished.Add(1)
		}
	})
	for i := range 2 {
		c := dial(t)
		h := retryHandler(t, e, c, queue, fn, idemamqp.WithBackoff(10*time.Millisecond, 20*time.Millisecond), count)
		handlers = append(handlers, h)
		ch, ds := consume(t, c, queue, 4)
		chans = append(chans, ch)
		for range 3 {
			if i == 0 {
				served.Go(func() { _ = h.Serve(ctx, ds) })
			} else {
				served.Go(func() { _ = h.ServeBatches(ctx, ds, 4) })
			}
		}
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(succeeded) == keys
	}
	ok := waitFor(30*time.Second, done)
	// let redeliveries and copies still in flight settle
	waitFor(5*time.Second, func() bool {
		for _, q := range append(handlers[0].RetryQueues(), queue) {
			if left(t, conn, q) != 0 {
				return false
			}
		}
		return true
	})
	cancel()
	served.Wait()
	for _, ch := range chans {
		_ = ch.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if !ok || republished.Load() < keys {
		t.Fatalf("%d of %d keys succeeded, %d copies republished (want at least one per key)", len(succeeded), keys, republished.Load())
	}
	for k, n := range succeeded {
		if n != 1 {
			t.Fatalf("key %s succeeded %d times, want 1", k, n)
		}
	}
	for _, q := range append(handlers[0].RetryQueues(), queue, dead) {
		if n := left(t, conn, q); n != 0 {
			t.Fatalf("%d message(s) left in %s", n, q)
		}
	}
}

// A delay queue deleted behind the Handler's back: the copy comes back
// unroutable (mandatory), so the delivery is requeued, not acked, and the
// next failure declares the queue again.
func TestDeletedDelayQueueIsDeclaredAgain(t *testing.T) {
	conn := dial(t)
	queue, dead := newDeadLetteredQueue(t, conn)
	publish(t, channel(t, conn), queue, "poison", "poison")
	var runs atomic.Int64
	var rep outcomes
	var h *idemamqp.Handler
	h = retryHandler(t, testkit.NewEngine(t), conn, queue, func(context.Context, *amqp.Delivery) ([]byte, error) {
		if runs.Add(1) == 2 {
			deleteQueue(t, conn, h.RetryQueues()[0])
		}
		return nil, errors.New("downstream says no")
	}, idemamqp.WithBackoff(20*time.Millisecond, 20*time.Millisecond), idemamqp.WithMaxAttempts(4), idemamqp.WithReport(rep.report))
	ch, ds := consume(t, conn, queue, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx, ds) }()
	ok := waitFor(10*time.Second, func() bool { return ready(t, conn, dead) == 1 })
	cancel()
	<-served
	_ = ch.Close()
	var got []string
	for _, o := range rep.got() {
		got = append(got, fmt.Sprintf("%v@%d", o.Action, o.Attempt))
	}
	want := []string{"republish@1", "requeue@2", "republish@3", "reject@4"}
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("poison outcomes %v (dead-lettered %v), want %v", got, ok, want)
	}
	if out := rep.got()[1]; !strings.Contains(out.Err.Error(), "returned") {
		t.Fatalf("requeue after the delay queue was deleted: %v, want the return reported", out.Err)
	}
}

func TestRetryQueuesAreOnePerBackoffStep(t *testing.T) {
	conn := dial(t)
	fn := func(context.Context, *amqp.Delivery) ([]byte, error) { return nil, nil }
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", fn, idemamqp.WithRetryQueue(conn, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"orders.idemkit.retry.1000", "orders.idemkit.retry.2000", "orders.idemkit.retry.4000", "orders.idemkit.retry.8000",
		"orders.idemkit.retry.16000", "orders.idemkit.retry.32000", "orders.idemkit.retry.60000"}
	if got := h.RetryQueues(); !slices.Equal(got, want) {
		t.Fatalf("default delay queues %v, want %v", got, want)
	}
	h, err = idemamqp.NewHandler(testkit.NewEngine(t), "orders", fn, idemamqp.WithRetryQueue(conn, "orders"), idemamqp.WithBackoff(1500*time.Microsecond, 4*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.RetryQueues(), []string{"orders.idemkit.retry.2", "orders.idemkit.retry.3", "orders.idemkit.retry.4"}; !slices.Equal(got, want) {
		t.Fatalf("delay queues %v for 1.5 ms to 4 ms, want %v (whole milliseconds, rounded up)", got, want)
	}
	bad := map[string]idemamqp.Option{
		"nil connection": idemamqp.WithRetryQueue(nil, "orders"),
		"empty queue":    idemamqp.WithRetryQueue(conn, ""),
		"long queue":     idemamqp.WithRetryQueue(conn, strings.Repeat("q", 240)),
	}
	for name, o := range bad {
		if _, err := idemamqp.NewHandler(testkit.NewEngine(t), "orders", fn, o); !errors.Is(err, idemkit.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
