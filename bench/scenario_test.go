package bench

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// Duplicate-storm parameters: dupRequests requests with one key, spread
// over two instances, against a handler whose work (standing for a database
// write) takes dupWork, so that duplicates arrive while the first runs.
const (
	dupRequests = 50
	dupWork     = 10 * time.Millisecond
)

// stack starts one guarded service instance serving o and returns its base
// URL. Each call makes an instance of its own: its own server, Redis client
// and middleware.
type stack struct {
	name  string
	start func(tb testing.TB, o *orders) string
}

// The stacks with their default duplicate handling.
var (
	idemkitStack      = stack{"idemkit", func(tb testing.TB, o *orders) string { return startIdemkit(tb, o, false) }}
	idemkitFiberStack = stack{"idemkit-fiber", func(tb testing.TB, o *orders) string { return startIdemkitFiber(tb, o, false) }}
	fiberStack        = stack{"fiber", func(tb testing.TB, o *orders) string { return startFiber(tb, o, true) }}
)

// guardedStacks are the stacks compared in the first-execution scenario.
var guardedStacks = []stack{idemkitStack, idemkitFiberStack, fiberStack}

// replayStacks adds the idemkit stacks with a near cache in front of Redis
// (nearcache.New), where a replay of a settled record makes no round
// trip.
var replayStacks = []stack{
	idemkitStack,
	{"idemkit-near", func(tb testing.TB, o *orders) string { return startIdemkit(tb, o, true) }},
	idemkitFiberStack,
	{"idemkit-fiber-near", func(tb testing.TB, o *orders) string { return startIdemkitFiber(tb, o, true) }},
	fiberStack,
}

// parallelStacks are the stacks of the scaling benchmarks.
var parallelStacks = guardedStacks

// stormStacks are the stacks compared under concurrent duplicates: idemkit
// answers a duplicate of an in-flight request with 409 by default, and with
// WithWait waits for the first outcome and replays it, as Fiber does.
var stormStacks = []stack{
	idemkitStack,
	{"idemkit-wait", func(tb testing.TB, o *orders) string {
		return startIdemkit(tb, o, false, idemhttp.WithWait(0))
	}},
	idemkitFiberStack,
	fiberStack,
}

// floorStack is one HTTP stack without middleware: bare serves the
// handler alone, oneGET the handler after one raw Redis GET.
type floorStack struct {
	name   string
	bare   func(tb testing.TB, o *orders) string
	oneGET func(tb testing.TB, o *orders) string
}

var floorStacks = []floorStack{
	{"nethttp", func(tb testing.TB, o *orders) string { return startNetHTTP(tb, routeOrders(orderHandler(o))) }, startNetHTTPFloor},
	{"fiber", func(tb testing.TB, o *orders) string { return startFiber(tb, o, false) }, startFiberFloor},
}

// storm sends n requests with key at once, spread in turn over urls, and
// returns every reply. A transport error fails the test.
func storm(tb testing.TB, c *http.Client, urls []string, key string, n int) []reply {
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = post(c, urls[i%len(urls)], key)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("storm: %v", err)
		}
	}
	return replies
}

// stormOutcome summarises the replies of one storm.
type stormOutcome struct {
	created   int // 201 replies
	conflicts int // 409 replies
	other     int // any other status
	orders    int // distinct order bodies among the 201 replies
}

func summarise(replies []reply) stormOutcome {
	var out stormOutcome
	bodies := map[string]bool{}
	for _, r := range replies {
		switch r.status {
		case http.StatusCreated:
			out.created++
			bodies[r.body] = true
		case http.StatusConflict:
			out.conflicts++
		default:
			out.other++
		}
	}
	out.orders = len(bodies)
	return out
}

// twoInstances starts two instances of s sharing o (the "database") and
// Redis, and returns their URLs and a client for both.
func twoInstances(tb testing.TB, s stack, o *orders) ([]string, *http.Client) {
	urls := []string{s.start(tb, o), s.start(tb, o)}
	return urls, newHTTPClient(tb)
}
