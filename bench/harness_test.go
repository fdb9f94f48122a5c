package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisEnv names the environment variable holding the Redis address.
const redisEnv = "IDEMKIT_BENCH_REDIS"

// Request constants shared by both stacks.
const (
	orderPath    = "/orders"
	orderBody    = `{"sku":"book-42","qty":1}`
	keyHeader    = "Idempotency-Key"
	userHeader   = "X-User-Id"
	benchUser    = "user-1"
	recordTTL    = 24 * time.Hour
	clientConns  = 128
	startTimeout = 5 * time.Second
)

// redisAddr is the Redis every test and benchmark uses, read by TestMain.
var redisAddr string

// runID makes keys unique to one run of the test binary, so that runs
// sharing a Redis never see each other's records.
var runID = newRunID()

func TestMain(m *testing.M) {
	redisAddr = os.Getenv(redisEnv)
	if redisAddr == "" {
		fmt.Fprintf(os.Stderr, "%s is not set: run ./bench/run.sh from the repository root, "+
			"or start a redis-server and export %s=127.0.0.1:6379\n", redisEnv, redisEnv)
		os.Exit(2)
	}
	if err := pingRedis(redisAddr); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%s: redis does not answer: %v\n", redisEnv, redisAddr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func pingRedis(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

func newRunID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// keySeq numbers the idempotency keys of one run.
var keySeq atomic.Uint64

// newKey returns a fresh idempotency key in UUID layout (36 characters),
// which Fiber's default key validator requires.
func newKey() string {
	return fmt.Sprintf("%s-0000-4000-8000-%012x", runID, keySeq.Add(1))
}

// newRedisClient returns a client of its own for one service instance, with
// go-redis defaults and its calls counted in redisCalls, closed at the end of
// the test.
func newRedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	rdb.AddHook(callCounter{})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// orders is the business handler both stacks wrap: it "creates an order" by
// counting a run, optionally after work standing for a database write, and
// returns the order as JSON. It is safe for concurrent use.
type orders struct {
	runs atomic.Int64
	work time.Duration
}

// create runs the handler once and returns the new order's id and body.
func (o *orders) create() (int64, []byte) {
	if o.work > 0 {
		time.Sleep(o.work)
	}
	id := o.runs.Add(1)
	body := `{"id":` + strconv.FormatInt(id, 10) + `,"sku":"book-42","qty":1}`
	return id, []byte(body)
}

// location is the Location header of order id.
func location(id int64) string {
	return orderPath + "/" + strconv.FormatInt(id, 10)
}

// listen opens a loopback listener on a free port.
func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	return ln
}

// newHTTPClient returns a keep-alive client able to hold enough idle
// connections for the concurrent scenarios.
func newHTTPClient(tb testing.TB) *http.Client {
	tr := &http.Transport{
		MaxIdleConns:        clientConns,
		MaxIdleConnsPerHost: clientConns,
		IdleConnTimeout:     time.Minute,
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// reply is what a client saw.
type reply struct {
	status int
	body   string
}

// post sends one order request with key (none when empty) to baseURL, as
// benchUser with orderBody.
func post(c *http.Client, baseURL, key string) (reply, error) {
	return postAs(c, baseURL, key, benchUser, orderBody)
}

// postAs sends one order request with key (none when empty), user and body.
func postAs(c *http.Client, baseURL, key, user, body string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, baseURL+orderPath, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(userHeader, user)
	if key != "" {
		req.Header.Set(keyHeader, key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, body: buf.String()}, nil
}

// mustPost is post for a benchmark loop: any transport error or a status
// other than want fails the benchmark.
func mustPost(tb testing.TB, c *http.Client, baseURL, key string, want int) {
	r, err := post(c, baseURL, key)
	if err != nil {
		tb.Fatalf("POST %s: %v", baseURL, err)
	}
	if r.status != want {
		tb.Fatalf("POST %s: status %d, want %d: %s", baseURL, r.status, want, r.body)
	}
}

// redisCalls counts the calls (round trips) made by every Redis client of the
// service instances. Benchmarks run one at a time, so a benchmark reads its
// own calls as the difference over its loop.
var redisCalls atomic.Int64

// callCounter is a go-redis hook that counts calls in redisCalls: one per
// command, one per pipeline.
type callCounter struct{}

func (callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		redisCalls.Add(1)
		return next(ctx, cmd)
	}
}

func (callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		redisCalls.Add(1)
		return next(ctx, cmds)
	}
}
