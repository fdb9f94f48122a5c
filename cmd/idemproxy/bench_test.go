package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
)

// countingStore counts the calls that reach the store: one per round trip
// for a remote store.
type countingStore struct {
	store.Store
	calls atomic.Int64
	nanos atomic.Int64 // wall time spent in store calls
}

// count counts a call; the function it returns adds the call's time.
func (c *countingStore) count() func() {
	c.calls.Add(1)
	start := time.Now()
	return func() { c.nanos.Add(int64(time.Since(start))) }
}

func (c *countingStore) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	defer c.count()()
	return c.Store.SetNX(ctx, k, v, ttl)
}

func (c *countingStore) Get(ctx context.Context, k string) (store.Entry, error) {
	defer c.count()()
	return c.Store.Get(ctx, k)
}

func (c *countingStore) CompareAndSwap(ctx context.Context, k string, o, n []byte, ttl time.Duration) (bool, error) {
	defer c.count()()
	return c.Store.CompareAndSwap(ctx, k, o, n, ttl)
}

func (c *countingStore) CompareAndDelete(ctx context.Context, k string, o []byte) (bool, error) {
	defer c.count()()
	return c.Store.CompareAndDelete(ctx, k, o)
}

func (c *countingStore) Consume(ctx context.Context, k string) ([]byte, error) {
	defer c.count()()
	return c.Store.Consume(ctx, k)
}

// benchUpstream answers every request with a small JSON body and counts.
type benchUpstream struct{ runs atomic.Int64 }

func (u *benchUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.runs.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "27")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"order":1,"status":"new"}`+"\n")
}

// BenchmarkProxy compares a bare httputil.ReverseProxy with idemproxy's
// key mode, first execution and replay, over memory and Redis, all on
// loopback in one process (client, proxy and upstream share the CPU: the
// cpu-µs/op metric is the whole process's, so the proxy's added CPU is
// the difference to bare). store-calls/op counts store round trips. A
// replay that reached the upstream fails the benchmark.
//
//	go test -run '^$' -bench BenchmarkProxy -benchtime 2000x ./idemproxy/
func BenchmarkProxy(b *testing.B) {
	up := &benchUpstream{}
	us := httptest.NewServer(up)
	defer us.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := `{"sku":"abc-123","qty":2}`

	b.Run("bare", func(b *testing.B) {
		u, _ := url.Parse(us.URL)
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, BufferPool: new(bufferPool)}
		srv := httptest.NewServer(rp)
		defer srv.Close()
		loop(b, client, srv.URL, body, func(i int) string { return fmt.Sprintf("bare-%d", i) }, nil)
	})
	rs := redistest.Start(b)
	for _, backend := range []struct{ name, url string }{{"mem", "mem://"}, {"redis", "redis://" + rs.Addr() + "/0"}} {
		cfg := parseConfig(b, baseConfig, us.URL, backend.url)
		st := mustStoresTB(b, cfg)
		cs := &countingStore{Store: st.primary}
		st.primary = cs
		p, err := newProxy(cfg, st, testLog(b))
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(p)
		b.Run(backend.name+"/store-roundtrip", func(b *testing.B) { // one SetNX, the unit of the store's cost
			run := fmt.Sprint(time.Now().UnixNano())
			defer reportCPU(b)()
			for i := range b.N {
				if _, _, err := cs.Store.SetNX(context.Background(), run+fmt.Sprint(i), []byte("v"), time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(backend.name+"/first", func(b *testing.B) {
			run := fmt.Sprintf("%d", time.Now().UnixNano())
			loop(b, client, srv.URL, body, func(i int) string { return "first-" + run + "-" + fmt.Sprint(i) }, cs)
		})
		b.Run(backend.name+"/replay", func(b *testing.B) {
			key := fmt.Sprintf("replay-%d", time.Now().UnixNano())
			send(b, srv.URL+"/orders", "POST", "alice", key, body)
			before := up.runs.Load()
			loop(b, client, srv.URL, body, func(int) string { return key }, cs)
			if n := up.runs.Load() - before; n != 0 {
				b.Fatalf("%d replays reached the upstream", n)
			}
		})
		srv.Close()
	}
}

// loop sends b.N key requests one after another and reports latency, CPU
// and store calls per request.
func loop(b *testing.B, client *http.Client, base, body string, key func(int) string, cs *countingStore) {
	req := func(i int) {
		r, _ := http.NewRequest("POST", base+"/orders", strings.NewReader(body))
		r.Header.Set("X-User", "alice")
		r.Header.Set("Idempotency-Key", key(i))
		r.Header.Set("Content-Type", "application/json")
		res, err := client.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
	for i := range 50 { // warm the connections
		req(-1 - i)
	}
	var c0, t0 int64
	if cs != nil {
		c0, t0 = cs.calls.Load(), cs.nanos.Load()
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		req(i)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	if cs != nil {
		b.ReportMetric(float64(cs.calls.Load()-c0)/float64(b.N), "store-calls/op")
		b.ReportMetric(float64(cs.nanos.Load()-t0)/1e3/float64(b.N), "store-µs/op")
	}
}

func mustStoresTB(b *testing.B, cfg *config) *stores {
	st, err := openStores(context.Background(), cfg.Store, cfg.StoreBudget.Duration, cfg.fallback(), testLog(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// cannedTransport answers every request in memory, like an upstream that
// costs nothing, so that a benchmark measures the proxy's own CPU.
type cannedTransport struct{ runs atomic.Int64 }

func (t *cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.runs.Add(1)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	body := `{"order":1,"status":"new"}` + "\n"
	return &http.Response{
		StatusCode: http.StatusCreated, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {"27"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r,
	}, nil
}

// BenchmarkProxyCPU measures the CPU the proxy itself spends per request:
// handlers called in process with an in-memory upstream and the memory
// store, one goroutine, no network. The difference between idemproxy and
// bare is the proxy's added CPU; over Redis add the store round trips
// (store-calls/op of BenchmarkProxy) and go-redis's client CPU.
//
//	go test -run '^$' -bench BenchmarkProxyCPU -benchmem ./idemproxy/
func BenchmarkProxyCPU(b *testing.B) {
	body := `{"sku":"abc-123","qty":2}`
	do := func(b *testing.B, h http.Handler, path, key string) {
		r := httptest.NewRequest("POST", "http://proxy"+path, strings.NewReader(body))
		r.Header.Set("X-User", "alice")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.Run("bare", func(b *testing.B) {
		u, _ := url.Parse("http://upstream")
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }, Transport: &cannedTransport{}}
		b.ReportAllocs()
		defer reportCPU(b)()
		for range b.N {
			do(b, rp, "/orders", "")
		}
	})
	b.Run("bare-pooled", func(b *testing.B) { // with idemproxy's buffer pool
		u, _ := url.Parse("http://upstream")
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
			Transport: &cannedTransport{}, BufferPool: new(bufferPool)}
		b.ReportAllocs()
		defer reportCPU(b)()
		for range b.N {
			do(b, rp, "/orders", "")
		}
	})
	ct := &cannedTransport{}
	cfg := parseConfig(b, baseConfig, "http://upstream", "mem://")
	p, err := newProxy(cfg, mustStoresTB(b, cfg), testLog(b))
	if err != nil {
		b.Fatal(err)
	}
	p.rp.Transport = ct
	b.Run("unrouted", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for range b.N {
			do(b, p, "/elsewhere", "")
		}
	})
	b.Run("mem/first", func(b *testing.B) {
		run := fmt.Sprint(time.Now().UnixNano())
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := range b.N {
			do(b, p, "/orders", run+"-"+fmt.Sprint(i))
		}
	})
	b.Run("mem/replay", func(b *testing.B) {
		key := fmt.Sprint("replay-", time.Now().UnixNano())
		do(b, p, "/orders", key)
		before := ct.runs.Load()
		b.ReportAllocs()
		b.ResetTimer()
		end := reportCPU(b)
		for range b.N {
			do(b, p, "/orders", key)
		}
		end()
		b.StopTimer()
		if n := ct.runs.Load() - before; n != 0 {
			b.Fatalf("%d replays reached the upstream", n)
		}
	})
}

// reportCPU starts measuring the process's CPU time; the function it
// returns reports it per operation as cpu-µs/op. CPU time, unlike ns/op,
// leaves out the time spent waiting for a core on a loaded machine.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	}
}
