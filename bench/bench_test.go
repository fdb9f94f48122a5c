package bench

import (
	"net/http"
	"testing"
)

// BenchmarkNoMiddleware is the baseline: each server with the handler alone,
// no key, so the middlewares' own cost can be read off the other rows.
func BenchmarkNoMiddleware(b *testing.B) {
	b.Run("nethttp", func(b *testing.B) {
		benchSerial(b, startNetHTTP(b, routeOrders(orderHandler(&orders{}))), func() string { return "" })
	})
	b.Run("fiber", func(b *testing.B) {
		benchSerial(b, startFiber(b, &orders{}, false), func() string { return "" })
	})
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
	for _, s := range guardedStacks {
		b.Run(s.name, func(b *testing.B) {
			key := newKey()
			benchSerial(b, s.start(b, &orders{}), func() string { return key })
		})
	}
}

// benchSerial sends requests one after another to url, each with the key
// next returns, expecting 201, and reports the Redis calls (round trips) per
// request.
func benchSerial(b *testing.B, url string, next func() string) {
	c := newHTTPClient(b)
	mustPost(b, c, url, next(), http.StatusCreated) // warm the connections and scripts
	calls := redisCalls.Load()
	b.ReportAllocs()
	for b.Loop() {
		mustPost(b, c, url, next(), http.StatusCreated)
	}
	b.ReportMetric(float64(redisCalls.Load()-calls)/float64(b.N), "redis-calls/op")
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
