package bench

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkNoMiddleware is the baseline: each server with the handler alone,
// no key, so the middlewares' own cost can be read off the other rows.
func BenchmarkNoMiddleware(b *testing.B) {
	for _, s := range floorStacks {
		b.Run(s.name, func(b *testing.B) {
			benchSerial(b, s.bare(b, &orders{}), func() string { return "" })
		})
	}
}

// BenchmarkOneGET is each HTTP stack's floor: the handler after one raw
// Redis GET, no middleware. A middleware's increment over its own stack's
// floor is what it adds to the one round trip a replay cannot avoid. The
// requests carry an Idempotency-Key, which the floor ignores, so that
// floor and middleware read the same request bytes.
func BenchmarkOneGET(b *testing.B) {
	for _, s := range floorStacks {
		b.Run(s.name, func(b *testing.B) {
			key := newKey()
			benchSerial(b, s.oneGET(b, &orders{}), func() string { return key })
		})
	}
}

// BenchmarkFirstExecution sends every request with a fresh key: the handler
// runs each time and its response is stored.
func BenchmarkFirstExecution(b *testing.B) {
	for _, s := range guardedStacks {
		b.Run(s.name, func(b *testing.B) {
			benchSerial(b, s.start(b, &orders{}), newKey)
		})
	}
}

// BenchmarkReplay sends every request with one key already completed: each
// gets the stored response.
func BenchmarkReplay(b *testing.B) {
	for _, s := range replayStacks {
		b.Run(s.name, func(b *testing.B) {
			key := newKey()
			benchSerial(b, s.start(b, &orders{}), func() string { return key })
		})
	}
}

// benchSerial sends requests one after another to url, each with the key
// next returns, expecting 201, and reports the Redis calls (round trips)
// and the Redis server's CPU per request.
func benchSerial(b *testing.B, url string, next func() string) {
	c := newHTTPClient(b)
	admin := adminClient(b)
	mustPost(b, c, url, next(), http.StatusCreated) // warm the connections and scripts
	calls, work := redisCalls.Load(), startWork(b, admin)
	callgrindZero(b) // after the admin commands, so only the ops are counted
	b.ReportAllocs()
	for b.Loop() {
		mustPost(b, c, url, next(), http.StatusCreated)
	}
	reportInstructions(b) // before INFO
	b.ReportMetric(float64(redisCalls.Load()-calls)/float64(b.N), "redis-calls/op")
	reportWork(b, admin, work)
}

// parallelClients are the client counts of the scaling benchmarks.
var parallelClients = []int{1, 8, 64}

// BenchmarkParallelFirst and BenchmarkParallelReplay measure throughput
// with 1, 8 and 64 clients sending at once (each a goroutine with its own
// keep-alive connection), per stack: req/s, and in the table its ratio to
// one client.
func BenchmarkParallelFirst(b *testing.B) {
	benchParallel(b, false)
}

func BenchmarkParallelReplay(b *testing.B) {
	benchParallel(b, true)
}

func benchParallel(b *testing.B, replay bool) {
	for _, s := range parallelStacks {
		for _, n := range parallelClients {
			b.Run(s.name+"/c"+strconv.Itoa(n), func(b *testing.B) {
				url := s.start(b, &orders{})
				next := newKey
				if replay {
					key := newKey()
					next = func() string { return key }
				}
				runClients(b, url, next, n)
			})
		}
	}
}

// runClients sends b.N requests from n concurrent clients and reports
// req/s.
func runClients(b *testing.B, url string, next func() string, n int) {
	c := newHTTPClient(b)
	for range n { // one warm connection per client
		mustPost(b, c, url, next(), http.StatusCreated)
	}
	var sent atomic.Int64
	var failed atomic.Pointer[string]
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for failed.Load() == nil && sent.Add(1) <= int64(b.N) {
				if r, err := post(c, url, next()); err != nil || r.status != http.StatusCreated {
					msg := fmt.Sprintf("POST %s: %v, status %d: %s", url, err, r.status, r.body)
					failed.CompareAndSwap(nil, &msg)
				}
			}
		})
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		b.Fatal(*msg)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkDuplicates sends, per operation, dupRequests concurrent requests
// with one fresh key over two instances sharing one Redis, and reports the
// handler runs, the 409 answers and the Redis calls per key.
func BenchmarkDuplicates(b *testing.B) {
	for _, s := range stormStacks {
		b.Run(s.name, func(b *testing.B) {
			o := &orders{work: dupWork}
			urls, c := twoInstances(b, s, o)
			storm(b, c, urls, newKey(), dupRequests) // open the connections
			start, calls := o.runs.Load(), redisCalls.Load()
			conflicts := 0
			b.ReportAllocs()
			for b.Loop() {
				conflicts += summarise(storm(b, c, urls, newKey(), dupRequests)).conflicts
			}
			b.ReportMetric(float64(o.runs.Load()-start)/float64(b.N), "runs/key")
			b.ReportMetric(float64(conflicts)/float64(b.N), "409s/key")
			b.ReportMetric(float64(redisCalls.Load()-calls)/float64(b.N), "redis-calls/op")
		})
	}
}
