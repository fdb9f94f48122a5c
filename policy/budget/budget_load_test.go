package budget_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store/redisstore"
)

// measureEnv enables TestBudgetSizingUnderCPULoad; measureSecondsEnv sets
// how long each scenario runs (default 10).
const (
	measureEnv        = "IDEMKIT_MEASURE_BUDGET"
	measureSecondsEnv = "IDEMKIT_MEASURE_SECONDS"
)

// TestBudgetSizingUnderCPULoad measures what a time budget must allow for:
// the latency of the engine's claim (SetNX) and completion
// (CompareAndSwap) through redisstore and go-redis with its default pool,
// against a healthy redis-server on loopback, idle and with the machine's
// CPUs saturated. It is a measurement, not a check, so it is skipped
// unless IDEMKIT_MEASURE_BUDGET is set:
//
//	IDEMKIT_MEASURE_BUDGET=1 go test -run TestBudgetSizingUnderCPULoad -v -count=1 ./policy/budget/
//
// It reports per-operation p50/p99/p99.9/max, how many calls each
// candidate budget would have cut off, and go-redis's pool statistics.
func TestBudgetSizingUnderCPULoad(t *testing.T) {
	if os.Getenv(measureEnv) == "" {
		t.Skipf("a measurement of several seconds: set %s=1 to run it", measureEnv)
	}
	d := 10 * time.Second
	if s := os.Getenv(measureSecondsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a whole number of seconds", measureSecondsEnv, s)
		}
		d = time.Duration(n) * time.Second
	}
	srv := redistest.Start(t)
	procs := runtime.GOMAXPROCS(0)
	pool := 10 * procs // go-redis's default PoolSize
	t.Logf("GOMAXPROCS %d, NumCPU %d, go-redis default pool of %d connections, %v per scenario", procs, runtime.NumCPU(), pool, d)
	for _, sc := range []loadScenario{
		{name: "idle, 8 callers", callers: 8},
		{name: "other process saturating the CPUs, 8 callers", callers: 8, outside: true},
		{name: "other process saturating the CPUs, 4x pool-size callers", callers: 4 * pool, outside: true},
		{name: "this process saturating the CPUs, 8 callers", callers: 8},
		{name: "this process saturating the CPUs, pool-size callers", callers: pool},
		{name: "this process saturating the CPUs, 4x pool-size callers", callers: 4 * pool},
	} {
		if !sc.outside && sc.name != "idle, 8 callers" {
			sc.burners = procs
		}
		sc.measure(t, srv, d)
	}
}

// burnEnv makes the test binary a CPU load process (see TestMain).
const burnEnv = "IDEMKIT_BURN_CPU"

// burnUntilStdinCloses keeps every CPU busy until its parent closes stdin.
func burnUntilStdinCloses() {
	stop := make(chan struct{})
	for range runtime.GOMAXPROCS(0) {
		go burn(stop)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	close(stop)
}

// startBurner starts a process that keeps every CPU busy until the
// returned function stops it.
func startBurner(t *testing.T) (stop func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burnEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = in.Close()
		_ = cmd.Wait()
	}
}

// loadScenario is one measured configuration: callers goroutines calling
// the store in a loop while burners goroutines spin on the CPU.
type loadScenario struct {
	name             string
	callers, burners int
	outside          bool // a separate process saturates the CPUs
}

func (sc loadScenario) measure(t *testing.T, srv *redistest.Server, d time.Duration) {
	o := srv.Options()
	o.MaxRetries = -1 // as the demo: a write is never resent
	var dials atomic.Int64
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}
	client := redis.NewClient(o)
	defer func() { _ = client.Close() }()
	rs, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}

	if sc.outside {
		defer startBurner(t)()
	}
	stop := make(chan struct{})
	var burning sync.WaitGroup
	for range sc.burners {
		burning.Go(func() { burn(stop) })
	}
	lat := sc.run(t, rs, d)
	close(stop)
	burning.Wait()

	st := client.PoolStats()
	t.Logf("%s:", sc.name)
	for _, op := range []string{"SetNX", "CompareAndSwap"} {
		t.Logf("  %-14s %s", op, summarize(lat[op]))
	}
	avgWait := time.Duration(0)
	if st.WaitCount > 0 {
		avgWait = time.Duration(st.WaitDurationNs / int64(st.WaitCount))
	}
	t.Logf("  pool: %d dials, %d conns, hits %d, misses %d, waits %d (mean %v), pool timeouts %d, stale %d",
		dials.Load(), st.TotalConns, st.Hits, st.Misses, st.WaitCount, avgWait.Round(time.Microsecond), st.Timeouts, st.StaleConns)
}

// run calls SetNX then CompareAndSwap on fresh keys from sc.callers
// goroutines for d and returns every call's latency by operation.
func (sc loadScenario) run(t *testing.T, rs *redisstore.Store, d time.Duration) map[string][]time.Duration {
	var mu sync.Mutex
	lat := map[string][]time.Duration{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for c := range sc.callers {
		wg.Go(func() {
			var setnx, cas []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				key := fmt.Sprintf("measure:%s:%d:%d", sc.name, c, i)
				start := time.Now()
				_, _, err := rs.SetNX(ctx, key, []byte("claim"), time.Minute)
				setnx = append(setnx, time.Since(start))
				if err != nil {
					t.Errorf("SetNX: %v", err)
					return
				}
				start = time.Now()
				_, err = rs.CompareAndSwap(ctx, key, []byte("claim"), []byte("done"), time.Minute)
				cas = append(cas, time.Since(start))
				if err != nil {
					t.Errorf("CompareAndSwap: %v", err)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lat["SetNX"] = append(lat["SetNX"], setnx...)
			lat["CompareAndSwap"] = append(lat["CompareAndSwap"], cas...)
		})
	}
	wg.Wait()
	return lat
}

// burn keeps one CPU busy until stop is closed.
func burn(stop <-chan struct{}) {
	x := uint64(1)
	for {
		select {
		case <-stop:
			return
		default:
		}
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		burnSink.Store(x)
	}
}

var burnSink atomic.Uint64

// summarize gives the count, percentiles and the number of calls each
// candidate budget would have cut off.
func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no calls"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	s := fmt.Sprintf("n=%d p50=%v p99=%v p99.9=%v max=%v; over", len(ds), r(q(0.5)), r(q(0.99)), r(q(0.999)), r(ds[len(ds)-1]))
	for _, b := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		over := 0
		if i := slices.IndexFunc(ds, func(d time.Duration) bool { return d > b }); i >= 0 {
			over = len(ds) - i
		}
		s += fmt.Sprintf(" %v: %d", b, over)
	}
	return s
}
