package idemnats_test

// The done-when test of issue 17 for JetStream: three consumer processes
// (this test binary re-executed) on one work-queue stream, a publisher
// sending 1,000 orders of which every fifth is published twice, an ack
// wait shorter than the slow handlers so the server redelivers messages
// still being processed, and one consumer SIGKILLed while it holds claims
// whose effects have not run. Every order's effect must happen exactly
// once (counted per order in a Redis the test owns), every message must
// be acknowledged (the stream empties), within 60 seconds.

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
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/queue/idemnats"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Parameters of the run.
const (
	orders       = 1000
	twiceEvery   = 5                      // every fifth order is published twice: 20%
	slowEvery    = 40                     // every 40th order's handler outlives the ack wait
	ackWait      = 400 * time.Millisecond // short: forces redeliveries of running messages
	slowHandler  = 700 * time.Millisecond
	lease        = 3 * time.Second // a killed consumer's claims free themselves this fast
	victimAfter  = 60              // the victim hangs on its 61st effect, then is killed
	runBound     = 60 * time.Second
	childEnvMode = "IDEMNATS_CHILD"
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
	js := connect(t)
	s, subject := newStream(t, js)
	newConsumer(t, s, ackWait)
	info, _ := s.Info(context.Background())
	modes := []string{"fetch", "consume", "fetch"} // child 0 is the victim
	children := make([]*child, len(modes))
	for i, mode := range modes {
		children[i] = startConsumer(t, mode, i == 0, rdb.Options().Addr, info.Config.Name)
	}
	waitReady(t, rdb, len(modes), start.Add(runBound)) // every consumer gets its share, the victim too
	publishOrders(t, js, subject)
	t.Logf("published %d messages for %d orders after %v", orders+orders/twiceEvery, orders, time.Since(start).Round(time.Millisecond))

	waitKey(t, rdb, "victim:hung", start.Add(runBound))
	children[0].kill(t)
	t.Logf("victim SIGKILLed after %v", time.Since(start).Round(time.Millisecond))

	for left := drained(t, s); left != 0; left = drained(t, s) {
		if time.Since(start) > runBound {
			t.Fatalf("%d messages not acknowledged after %v", left, runBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	for _, c := range children[1:] {
		c.stop(t)
	}
	checkEffects(t, rdb)
	stats := rdb.HGetAll(context.Background(), "stats").Val()
	t.Logf("drained in %v; outcomes over all consumers: %v", elapsed.Round(time.Millisecond), stats)
	if stats["term"] != "" || stats["record-errors"] != "" {
		t.Fatalf("terminated messages or unrecorded results: %v", stats)
	}
	if n, _ := strconv.Atoi(stats["nak-in-progress"]); n == 0 {
		t.Fatalf("no delivery found its key in progress: the ack wait forced no redelivery (%v)", stats)
	}
}

// publishOrders publishes every order once and every fifth twice, the
// copies shuffled in, with the business key in the Order-Id header (and no
// Nats-Msg-Id, so the server's own duplicate window does not drop them).
func publishOrders(t *testing.T, js jetstream.JetStream, subject string) {
	var ids []int
	for i := range orders {
		ids = append(ids, i)
		if i%twiceEvery == 0 {
			ids = append(ids, i)
		}
	}
	rand.Shuffle(len(ids), func(a, b int) { ids[a], ids[b] = ids[b], ids[a] })
	for _, id := range ids {
		publish(t, js, subject, strconv.Itoa(id), "Order-Id", strconv.Itoa(id))
	}
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
	log   string
}

func startConsumer(t *testing.T, mode string, victim bool, redisAddr, stream string) *child {
	log := filepath.Join(t.TempDir(), mode+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnvMode+"="+mode, "IDEMNATS_REDIS="+redisAddr,
		"IDEMNATS_STREAM="+stream, "IDEMNATS_VICTIM="+strconv.FormatBool(victim))
	cmd.Stdout, cmd.Stderr = f, f
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, log: log}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("%s consumer log:\n%s", mode, tail(string(b), 20))
		}
	})
	return c
}

// kill SIGKILLs the consumer: no cleanup, no acks, claims left held.
func (c *child) kill(t *testing.T) {
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

// stop closes the consumer's stdin, which makes it stop and exit.
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

// runConsumer is a consumer process: it processes the stream with a
// Handler over redisstore until its stdin closes. Its effect is INCR
// effect:<order> in Redis; its outcomes are counted in the hash stats.
func runConsumer(mode string) int {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("IDEMNATS_REDIS"),
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	st, err := redisstore.New(rdb)
	if err != nil {
		return fail(err)
	}
	e, err := idemkit.New(st, idemkit.WithObserver(nil))
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(natsURL())
	if err != nil {
		return fail(err)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(ctx, os.Getenv("IDEMNATS_STREAM"), "workers")
	if err != nil {
		return fail(err)
	}
	h, err := idemnats.NewHandler(e, "orders", effect(rdb, os.Getenv("IDEMNATS_VICTIM") == "true"),
		idemnats.WithKey(idemnats.HeaderKey("Order-Id")),
		idemnats.WithRetryDelay(100*time.Millisecond),
		idemnats.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		idemnats.WithEngineOptions(idemkit.WithLease(lease), idemkit.WithRetryHint(200*time.Millisecond)))
	if err != nil {
		return fail(err)
	}
	stats := func(out idemnats.Outcome) { count(rdb, out) }
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	switch mode {
	case "consume":
		cc, err := cons.Consume(func(m jetstream.Msg) { stats(h.HandleContext(ctx, m)) }, jetstream.PullMaxMessages(20))
		if err != nil {
			return fail(err)
		}
		rdb.Incr(ctx, "ready")
		<-stop
		cc.Stop()
	default:
		rdb.Incr(ctx, "ready")
		fetchLoop(ctx, h, cons, stop, stats)
	}
	nc.Close()
	return 0
}

func fetchLoop(ctx context.Context, h *idemnats.Handler, cons jetstream.Consumer, stop <-chan struct{}, stats func(idemnats.Outcome)) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		outs, _ := h.Fetch(ctx, cons, 20, jetstream.FetchMaxWait(300*time.Millisecond))
		for _, out := range outs {
			stats(out)
		}
	}
}

// effect is the handler: INCR effect:<order>. The victim hangs before its
// effect once it has run victimAfter of them, holding its claims, until
// the test kills it.
func effect(rdb *redis.Client, victim bool) idemnats.Func {
	var ran int
	return func(ctx context.Context, m jetstream.Msg) ([]byte, error) {
		id, _ := strconv.Atoi(m.Headers().Get("Order-Id"))
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

// count adds an outcome to the hash stats.
func count(rdb *redis.Client, out idemnats.Outcome) {
	field := out.Action.String()
	switch {
	case out.Replayed:
		field = "ack-replayed"
	case out.Ran && out.Action == idemnats.Ack && out.Err != nil:
		field = "record-errors"
	case out.Ran && out.Action == idemnats.Ack:
		field = "ack-ran"
	case out.Action == idemnats.Nak && errors.Is(out.Err, idemkit.ErrInProgress):
		field = "nak-in-progress"
	}
	rdb.HIncrBy(context.Background(), "stats", field, 1)
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "consumer:", err)
	return 1
}
