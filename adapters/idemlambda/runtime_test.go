package idemlambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
	"github.com/idemkit/idemkit/store"
)

// The end-to-end tests run this test binary as a Lambda function: with
// childEnv set, TestMain calls lambda.Start over an HTTPAPI handler, and
// the real runtime loop of aws-lambda-go talks to the Runtime API server
// the test runs on loopback. The engine's store is the one storeEnv
// names by URL (Redis or DynamoDB); the effects are counted in Redis.
const (
	childEnv = "IDEMLAMBDA_RUNTIME_CHILD" // the Redis address, for the counts
	storeEnv = "IDEMLAMBDA_RUNTIME_STORE" // the store's URL
	nsEnv    = "IDEMLAMBDA_RUNTIME_NS"    // the engine's namespace
)

// runtimeChild runs the function when the binary is a child of a runtime
// test; lambda.Start never returns.
func runtimeChild() bool {
	addr := os.Getenv(childEnv)
	if addr == "" {
		return false
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	st, err := store.Open(context.Background(), os.Getenv(storeEnv))
	if err != nil {
		panic(err)
	}
	e, err := idemkit.New(st, idemkit.WithNamespace(os.Getenv(nsEnv)), idemkit.WithObserver(nil),
		idemkit.WithLease(time.Hour)) // an invocation's deadline, not this, must bound its claim
	if err != nil {
		panic(err)
	}
	h, err := idemlambda.HTTPAPI(e, "orders", func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		key := req.Headers["idempotency-key"]
		if strings.Contains(req.Body, "hang") && rdb.Incr(ctx, "hangs:"+key).Val() == 1 {
			select {} // outlasts its deadline: the runtime kills the process
		}
		n := rdb.Incr(ctx, "effects:"+key).Val()
		time.Sleep(20 * time.Millisecond) // the effect takes a while: duplicates overlap it
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated,
			Headers: map[string]string{"Content-Type": "application/json"},
			Body:    fmt.Sprintf(`{"order":%d,"pid":%d}`, n, os.Getpid())}, nil
	}, httpPrincipal)
	if err != nil {
		panic(err)
	}
	lambda.Start(h)
	return true
}

// invocation is one event the Runtime API hands out, and its outcome.
type invocation struct {
	id       string
	event    []byte
	timeout  time.Duration
	deadline time.Time // set when a runtime takes it, as Lambda starts the clock
	done     chan outcome
}

type outcome struct {
	kind string // "response" or "error"
	body []byte
}

// runtimeAPI is the part of the Lambda Runtime API a runtime client uses:
// GET .../invocation/next, POST .../invocation/{id}/response and
// .../{id}/error.
type runtimeAPI struct {
	queue   chan *invocation
	mu      sync.Mutex
	pending map[string]*invocation
	next    int
	taken   chan *invocation // every invocation handed out
}

func newRuntimeAPI(t *testing.T) (*runtimeAPI, string) {
	api := &runtimeAPI{queue: make(chan *invocation, 64), pending: map[string]*invocation{}, taken: make(chan *invocation, 64)}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, strings.TrimPrefix(srv.URL, "http://")
}

func (a *runtimeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const base = "/2018-06-01/runtime/invocation/"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == base+"next":
		select {
		case inv := <-a.queue:
			inv.deadline = time.Now().Add(inv.timeout) // read by the test after <-a.taken
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:orders")
			w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793")
			_, _ = w.Write(inv.event)
			a.taken <- inv
		case <-r.Context().Done():
		}
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, base):
		id, kind, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, base), "/")
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		inv := a.pending[id]
		delete(a.pending, id)
		a.mu.Unlock()
		if !ok || inv == nil || (kind != "response" && kind != "error") {
			http.Error(w, "unknown invocation", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		inv.done <- outcome{kind, body}
	default:
		http.NotFound(w, r) // the extensions API, which the runtime may try
	}
}

// invoke queues event with timeout and returns its invocation.
func (a *runtimeAPI) invoke(event []byte, timeout time.Duration) *invocation {
	a.mu.Lock()
	a.next++
	inv := &invocation{id: fmt.Sprintf("req-%d", a.next), event: event, timeout: timeout, done: make(chan outcome, 1)}
	a.pending[inv.id] = inv
	a.mu.Unlock()
	a.queue <- inv
	return inv
}

// function names the store and namespace of a runtime test's functions.
type function struct{ store, ns string }

// runtimeStores runs f as a subtest over each store a child can open by
// URL: the test Redis, and a fresh table of the test dynalite.
func runtimeStores(t *testing.T, f func(t *testing.T, fn function)) {
	t.Run("redis", func(t *testing.T) {
		f(t, function{"redis://" + redisAddr, fmt.Sprintf("rt%d", namespaces.Add(1))})
	})
	t.Run("dynamodb", func(t *testing.T) {
		s, _ := openDynamo(t)
		u := "dynamodb://" + s.Table() + "?region=us-east-1&endpoint=" + url.QueryEscape(dynaliteEndpoint)
		f(t, function{u, fmt.Sprintf("rt%d", namespaces.Add(1))})
	})
}

// startFunction starts one execution environment: this binary as a
// function whose runtime loop talks to addr.
func startFunction(t *testing.T, addr string, fn function) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+redisAddr, storeEnv+"="+fn.store, nsEnv+"="+fn.ns,
		"AWS_LAMBDA_RUNTIME_API="+addr, "AWS_LAMBDA_FUNCTION_NAME=orders", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128",
		// dynalite checks no signature; the SDK's default chain needs one
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// wait returns inv's API Gateway response.
func (inv *invocation) wait(t *testing.T) events.APIGatewayV2HTTPResponse {
	t.Helper()
	select {
	case out := <-inv.done:
		require.Equal(t, "response", out.kind, "invocation %s failed: %s", inv.id, out.body)
		var resp events.APIGatewayV2HTTPResponse
		require.NoError(t, json.Unmarshal(out.body, &resp))
		return resp
	case <-time.After(30 * time.Second):
		t.Fatalf("no outcome for %s", inv.id)
	}
	return events.APIGatewayV2HTTPResponse{}
}

func httpEvent(t *testing.T, key, body string) []byte {
	req := load[events.APIGatewayV2HTTPRequest](t, "apigw-http.json")
	req.Headers["idempotency-key"] = key
	req.Body = body
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return b
}

// Two execution environments, each a real lambda.Start process, take
// duplicate invocations of one request from the Runtime API at once: the
// effect runs once; every answer is the first response (marked replayed
// after the first) or a 409 with Retry-After, and every repeat after it
// answered is its replay.
func TestRuntimeAPIDuplicatesRunOnce(t *testing.T) {
	runtimeStores(t, testRuntimeAPIDuplicatesRunOnce)
}

func testRuntimeAPIDuplicatesRunOnce(t *testing.T, fn function) {
	api, addr := newRuntimeAPI(t)
	for range 2 {
		startFunction(t, addr, fn)
	}
	key := fn.ns + "-k1"
	event := httpEvent(t, key, `{"orderId":"o-1"}`)
	var invs []*invocation
	for range 12 {
		invs = append(invs, api.invoke(event, 10*time.Second))
	}
	bodies := map[string]bool{}
	fresh, replays, conflicts := 0, 0, 0
	for _, inv := range invs {
		resp := inv.wait(t)
		switch resp.StatusCode {
		case http.StatusCreated:
			bodies[resp.Body] = true
			if resp.Headers[idemlambda.ReplayedHeader] == "true" {
				replays++
			} else {
				fresh++
			}
		case http.StatusConflict:
			require.NotEmpty(t, resp.Headers["Retry-After"])
			conflicts++
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
	}
	effects, err := redisClient(t).Get(context.Background(), "effects:"+key).Int()
	require.NoError(t, err)
	require.Equal(t, 1, effects)
	require.Equal(t, 1, fresh)
	// Once the first has answered, every repeat is its replay. (Within the
	// batch one process may answer all the others 409 while the effect
	// runs in the other, so the batch alone may hold no replay.)
	for range 2 {
		resp := api.invoke(event, 10*time.Second).wait(t)
		require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
		require.Equal(t, "true", resp.Headers[idemlambda.ReplayedHeader])
		bodies[resp.Body] = true
	}
	require.Len(t, bodies, 1)
	t.Logf("12 invocations over 2 processes: 1 fresh, %d replays, %d conflicts", replays, conflicts)
}

// An invocation that outlasts its deadline is stopped as Lambda stops it
// (its process killed); the retry, in a fresh execution environment, is
// admitted once the deadline has passed and runs the effect once.
func TestRuntimeAPITimedOutInvocationRetries(t *testing.T) {
	runtimeStores(t, testRuntimeAPITimedOutInvocationRetries)
}

func testRuntimeAPITimedOutInvocationRetries(t *testing.T, fn function) {
	api, addr := newRuntimeAPI(t)
	first := startFunction(t, addr, fn)
	key := fn.ns + "-k2"
	event := httpEvent(t, key, `{"orderId":"o-2","note":"hang"}`)
	inv := api.invoke(event, time.Second) // from handout: a loaded machine starts late
	<-api.taken
	rdb := redisClient(t)
	testkitWait(t, "the first invocation to hang", func() bool { return rdb.Get(context.Background(), "hangs:"+key).Val() == "1" })
	time.Sleep(time.Until(inv.deadline)) // Lambda's timeout: kill the process at the deadline
	require.NoError(t, first.Process.Kill())
	_, _ = first.Process.Wait()

	startFunction(t, addr, fn) // a cold start for the retry
	var resp events.APIGatewayV2HTTPResponse
	testkitWait(t, "the retry to run", func() bool {
		// A 409 can only come from the store seeing the claim a moment
		// longer than the function did; the engine's lease is an hour.
		resp = api.invoke(event, 10*time.Second).wait(t)
		return resp.StatusCode != http.StatusConflict
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	require.Empty(t, resp.Headers[idemlambda.ReplayedHeader])
	effects, err := rdb.Get(context.Background(), "effects:"+key).Int()
	require.NoError(t, err)
	require.Equal(t, 1, effects)
}
