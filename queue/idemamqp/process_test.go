package idemamqp_test

// The done-when test of issue 17 for RabbitMQ: three consumer processes
// (this test binary re-executed) on one queue, a publisher sending 1,000
// orders of which every fifth is published twice, an ack deadline shorter
// than the slow handlers so messages still being processed are
// redelivered, and one consumer SIGKILLed while it holds claims whose
// effects have not run. Every order's effect must happen exactly once
// (counted per order in a Redis the test owns), every message must be
// acknowledged, within 60 seconds.
//
// RabbitMQ's own ack deadline (consumer_timeout) is checked once a minute,
// too coarse for a bounded test, so each consumer enforces it the way the
// broker does: a channel whose delivery has been held past the deadline is
// closed, and the broker requeues its unacknowledged deliveries with the
// Redelivered flag.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/queue/idemamqp"
	"github.com/idemkit/idemkit/store/redisstore"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Parameters of the run.
const (
	orders       = 1000
	twiceEvery   = 5                      // every fifth order is published twice: 20%
	slowEvery    = 40                     // every 40th order's handler outlives the ack deadline
	ackDeadline  = 400 * time.Millisecond // short: forces redeliveries of running messages
	slowHandler  = 700 * time.Millisecond
	lease        = 3 * time.Second // a killed consumer's claims free themselves this fast
	victimAfter  = 60              // the victim hangs on its 61st effect, then is killed
	runBound     = 60 * time.Second
	prefetch     = 20
	childEnvMode = "IDEMAMQP_CHILD"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnvMode); mode != "" {
		os.Exit(runConsumer(mode))
	}
	os.Exit(m.Run())
}

func TestExactlyOnceAcrossProcessesWithKill(t *testing.T) {
	start := time.Now()
	rdb := redistest.Start(t).Client(t)
	conn := dial(t)
	queue := newQueue(t, conn)
	// Child 0 is the victim. It serves one delivery at a time, so every ack
	// it sent before it hung is in the set acked (a batch reports its
	// outcomes when the whole batch is done).
	modes := []string{"serve", "batch", "batch"}
	children := make([]*child, len(modes))
	for i, mode := range modes {
		children[i] = startConsumer(t, mode, i == 0, rdb.Options().Addr, queue)
	}
	waitReady(t, rdb, len(modes), start.Add(runBound)) // every consumer gets its share, the victim too
	published := publishOrders(t, channel(t, conn), queue)
	t.Logf("published %d messages for %d orders after %v", published, orders, time.Since(start).Round(time.Millisecond))

	waitKey(t, rdb, "victim:hung", start.Add(runBound))
	children[0].kill(t)
	t.Logf("victim SIGKILLed after %v", time.Since(start).Round(time.Millisecond))

	ctx := context.Background()
	for rdb.SCard(ctx, "acked").Val() < int64(published) || ready(t, conn, queue) != 0 {
		if time.Since(start) > runBound {
			t.Fatalf("%d of %d publications acknowledged after %v", rdb.SCard(ctx, "acked").Val(), published, runBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	for _, c := range children[1:] {
		c.stop(t)
	}
	if n := ready(t, conn, queue); n != 0 {
		t.Fatalf("%d messages back in the queue after the consumers closed: not acknowledged", n)
	}
	checkEffects(t, rdb)
	stats := rdb.HGetAll(ctx, "stats").Val()
	t.Logf("all acknowledged in %v; outcomes over all consumers: %v", elapsed.Round(time.Millisecond), stats)
	if stats["reject"] != "" || stats["record-errors"] != "" {
		t.Fatalf("rejected messages or unrecorded results: %v", stats)
	}
	if n, _ := strconv.Atoi(stats["requeue-in-progress"]); n == 0 {
		t.Fatalf("no delivery found its key in progress: the ack deadline forced no redelivery (%v)", stats)
	}
}

// publishOrders publishes every order once and every fifth twice, the
// copies shuffled in, each publication with its own MessageId and the
// business key in the Order-Id header. It returns the number published.
func publishOrders(t *testing.T, ch *amqp.Channel, queue string) int {
	var ids []int
	for i := range orders {
		ids = append(ids, i)
		if i%twiceEvery == 0 {
			ids = append(ids, i)
		}
	}
	rand.Shuffle(len(ids), func(a, b int) { ids[a], ids[b] = ids[b], ids[a] })
	for n, id := range ids {
		publish(t, ch, queue, "pub-"+strconv.Itoa(n), strconv.Itoa(id), "Order-Id", strconv.Itoa(id))
	}
	return len(ids)
}

// checkEffects fails the test unless every order's effect ran exactly once.
func checkEffects(t *testing.T, rdb *redis.Client) {
	keys := make([]string, orders)
	for i := range keys {
		keys[i] = "effect:" + strconv.Itoa(i)
	}
	vals, err := rdb.MGet(context.Background(), keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i, v := range vals {
		n, _ := v.(string)
		counts[n]++
		if n != "1" {
			t.Errorf("order %d: effect count %q, want 1", i, n)
		}
	}
	t.Logf("effect counts per order: %v (count: orders)", counts)
}

// waitReady waits, until deadline, for n consumers to be consuming.
func waitReady(t *testing.T, rdb *redis.Client, n int, deadline time.Time) {
	for rdb.Get(context.Background(), "ready").Val() != strconv.Itoa(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%s of %d consumers ready", rdb.Get(context.Background(), "ready").Val(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitKey waits, until deadline, for key to exist.
func waitKey(t *testing.T, rdb *redis.Client, key string, deadline time.Time) {
	for rdb.Exists(context.Background(), key).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never set", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// child is one consumer process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startConsumer(t *testing.T, mode string, victim bool, redisAddr, queue string) *child {
	log := filepath.Join(t.TempDir(), mode+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnvMode+"="+mode, "IDEMAMQP_REDIS="+redisAddr,
		"IDEMAMQP_QUEUE="+queue, "IDEMAMQP_VICTIM="+strconv.FormatBool(victim))
	cmd.Stdout, cmd.Stderr = f, f
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("%s consumer log:\n%s", mode, tail(string(b), 20))
		}
	})
	return &child{cmd: cmd, stdin: stdin}
}

// kill SIGKILLs the consumer: no cleanup, no acks, claims left held.
func (c *child) kill(t *testing.T) {
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

// stop closes the consumer's stdin, which makes it cancel its consumer,
// settle the deliveries it holds and exit.
func (c *child) stop(t *testing.T) {
	_ = c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("consumer exited: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("consumer did not stop")
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// consumer is the state of one consumer process.
type consumer struct {
	rdb   *redis.Client
	h     *idemamqp.Handler
	conn  *amqp.Connection
	queue string
	busy  atomic.Int64 // unix nanos when the current delivery or batch began; 0 when idle

	announced bool // counted in "ready"
}

// runConsumer is a consumer process: it processes the queue with a
// Handler over redisstore until its stdin closes. Its effect is INCR
// effect:<order> in Redis; its outcomes are counted in the hash stats,
// and the MessageId of every acknowledged publication goes in the set
// acked.
func runConsumer(mode string) int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("IDEMAMQP_REDIS"),
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	st, err := redisstore.New(rdb)
	if err != nil {
		return fail(err)
	}
	e, err := idemkit.New(st, idemkit.WithObserver(nil))
	if err != nil {
		return fail(err)
	}
	c := &consumer{rdb: rdb, queue: os.Getenv("IDEMAMQP_QUEUE")}
	c.h, err = idemamqp.NewHandler(e, "orders", effect(rdb, os.Getenv("IDEMAMQP_VICTIM") == "true"),
		idemamqp.WithKey(idemamqp.HeaderKey("Order-Id")),
		idemamqp.WithRetryDelay(100*time.Millisecond),
		idemamqp.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		idemamqp.WithEngineOptions(idemkit.WithLease(lease), idemkit.WithRetryHint(200*time.Millisecond)))
	if err != nil {
		return fail(err)
	}
	if c.conn, err = amqp.Dial(amqpURL()); err != nil {
		return fail(err)
	}
	defer c.conn.Close()
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	for {
		if err := c.session(mode, stop); err != nil {
			return fail(err)
		}
		select {
		case <-stop:
			return 0
		default: // the deadline closed the channel: open another
		}
	}
}

// session consumes on one channel until the ack deadline closes it or the
// process is told to stop; then it cancels the consumer and settles the
// deliveries it still holds.
func (c *consumer) session(mode string, stop <-chan struct{}) error {
	ch, err := c.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(c.queue, "worker", false, false, false, false, nil)
	if err != nil {
		return err
	}
	if !c.announced {
		c.announced = true
		c.rdb.Incr(context.Background(), "ready")
	}
	done := make(chan struct{})
	defer close(done)
	go c.watch(ch, stop, done)
	ctx := context.Background()
	if mode == "serve" {
		for d := range ds {
			c.begin()
			c.count(&d, c.h.Handle(ctx, d))
			c.busy.Store(0)
		}
		return nil
	}
	for d := range ds {
		batch := collect(d, ds)
		c.rdb.HIncrBy(context.Background(), "stats", "batches", 1)
		c.rdb.HIncrBy(context.Background(), "stats", "batch-deliveries", int64(len(batch)))
		c.begin()
		for i, out := range c.h.HandleBatch(ctx, batch) {
			c.count(&batch[i], out)
		}
		c.busy.Store(0)
	}
	return nil
}

// collect returns first and whatever ds holds without waiting, up to
// prefetch deliveries.
func collect(first amqp.Delivery, ds <-chan amqp.Delivery) []amqp.Delivery {
	batch := []amqp.Delivery{first}
	for len(batch) < prefetch {
		select {
		case d, ok := <-ds:
			if !ok {
				return batch
			}
			batch = append(batch, d)
		default:
			return batch
		}
	}
	return batch
}

func (c *consumer) begin() { c.busy.Store(time.Now().UnixNano()) }

// watch enforces the ack deadline: a delivery (or batch) held longer
// closes the channel, as the broker's consumer timeout does. When told to
// stop, it cancels the consumer so the deliveries channel drains and
// closes.
func (c *consumer) watch(ch *amqp.Channel, stop <-chan struct{}, done <-chan struct{}) {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-stop:
			_ = ch.Cancel("worker", false)
			return
		case <-tick.C:
			if b := c.busy.Load(); b != 0 && time.Since(time.Unix(0, b)) > ackDeadline {
				c.rdb.HIncrBy(context.Background(), "stats", "deadline-channel-closes", 1)
				_ = ch.Close()
				return
			}
		}
	}
}

// effect is the handler: INCR effect:<order>. The victim hangs before its
// effect once it has run victimAfter of them, holding its claims, until
// the test kills it.
func effect(rdb *redis.Client, victim bool) idemamqp.Func {
	var ran int
	return func(ctx context.Context, d *amqp.Delivery) ([]byte, error) {
		id, _ := strconv.Atoi(string(d.Body))
		if victim {
			if ran++; ran > victimAfter {
				rdb.Set(ctx, "victim:hung", 1, 0)
				select {}
			}
		}
		if id%slowEvery == 0 {
			time.Sleep(slowHandler)
		}
		if err := rdb.Incr(ctx, "effect:"+strconv.Itoa(id)).Err(); err != nil {
			return nil, err
		}
		return []byte("ok"), nil
	}
}

// count adds an outcome to the hash stats, and an acknowledged
// publication to the set acked.
func (c *consumer) count(d *amqp.Delivery, out idemamqp.Outcome) {
	ctx := context.Background()
	var amqpErr *amqp.Error
	ackFailed := errors.As(out.Err, &amqpErr)
	field := out.Action.String()
	switch {
	case ackFailed:
		field = out.Action.String() + "-failed-channel-closed"
	case out.Replayed:
		field = "ack-replayed"
	case out.Ran && out.Action == idemamqp.Ack && out.Err != nil:
		field = "record-errors"
	case out.Ran && out.Action == idemamqp.Ack:
		field = "ack-ran"
	case out.Action == idemamqp.Requeue && errors.Is(out.Err, idemkit.ErrInProgress):
		field = "requeue-in-progress"
	}
	c.rdb.HIncrBy(ctx, "stats", field, 1)

	if out.Redelivered {
		c.rdb.HIncrBy(ctx, "stats", "redelivered-flag", 1)
	}
	if out.Action == idemamqp.Ack && !ackFailed {
		c.rdb.SAdd(ctx, "acked", d.MessageId)
	}
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "consumer:", err)
	return 1
}
