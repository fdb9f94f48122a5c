package policy_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

const benchKeys = 1024

var benchKeyNames = func() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-key-%04d", i)
	}
	return keys
}()

// fill stores a settled value under every bench key.
func fill(b *testing.B, s store.Store) {
	for _, k := range benchKeyNames {
		if _, _, err := s.SetNX(ctx, k, []byte("S-settled-value"), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// storeOp is one benchmarked operation on key i.
type storeOp func(s store.Store, i int) error

var benchOpsByName = map[string]storeOp{
	"SetNX": func(s store.Store, i int) error { // on a held key: the duplicate check
		_, _, err := s.SetNX(ctx, benchKeyNames[i%benchKeys], []byte("S-new"), time.Hour)
		return err
	},
	"Get": func(s store.Store, i int) error {
		_, err := s.Get(ctx, benchKeyNames[i%benchKeys])
		return err
	},
}

// compare measures base and other in alternating chunks of the same run,
// so that a machine's changing load affects both alike. It reports each
// one's mean ns/op and the median, over chunk pairs, of other's time over
// base's (a ratio robust to load bursts).
func compare(b *testing.B, base, other store.Store) {
	for _, name := range []string{"SetNX", "Get"} {
		op := benchOpsByName[name]
		b.Run(name, func(b *testing.B) {
			const chunk = 128
			run := func(s store.Store, from int) time.Duration {
				start := time.Now()
				for i := from; i < from+chunk; i++ {
					if err := op(s, i); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			var tBase, tOther time.Duration
			var ratios []float64
			n := 0
			for ; n < b.N; n += chunk {
				var db, do time.Duration
				if (n/chunk)%2 == 0 {
					db = run(base, n)
					do = run(other, n)
				} else {
					do = run(other, n)
					db = run(base, n)
				}
				tBase += db
				tOther += do
				ratios = append(ratios, float64(do)/float64(db))
			}
			slices.Sort(ratios)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(tBase.Nanoseconds())/float64(n), "base-ns/op")
			b.ReportMetric(float64(tOther.Nanoseconds())/float64(n), "other-ns/op")
			b.ReportMetric(ratios[len(ratios)/2], "ratio")
		})
	}
}

// BenchmarkTiered compares a Tiered with its breaker closed (other) to its
// bare primary (base), in one run; the target ratio is at most 1.05.
func BenchmarkTiered(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		primary := newMem(b)
		fill(b, primary)
		compare(b, primary, mustTiered(b, primary, newMem(b)))
		b.Run("bare/SetNX/parallel", func(b *testing.B) { benchParallel(b, primary) })
		b.Run("tiered/SetNX/parallel", func(b *testing.B) { benchParallel(b, mustTiered(b, primary, newMem(b))) })
	})
	b.Run("redis", func(b *testing.B) {
		primary := benchRedis(b)
		fill(b, primary)
		compare(b, primary, mustTiered(b, primary, newMem(b)))
	})
}

// BenchmarkBudget compares a budgeted store (other) to the bare store
// (base), detached (the default) and inline.
func BenchmarkBudget(b *testing.B) {
	for _, backend := range []string{"memstore", "redis"} {
		b.Run(backend, func(b *testing.B) {
			var s store.Store = newMem(b)
			if backend == "redis" {
				s = benchRedis(b)
			}
			fill(b, s)
			b.Run("detached", func(b *testing.B) { compare(b, s, mustBudget(b, s, time.Second)) })
			b.Run("inline", func(b *testing.B) { compare(b, s, mustBudget(b, s, time.Second, policy.WithInline())) })
		})
	}
}

// BenchmarkNearCache compares a near-cache hit on a settled key (other)
// with a Redis round trip (base).
func BenchmarkNearCache(b *testing.B) {
	s := benchRedis(b)
	fill(b, s)
	nc := mustNear(b, s, settledS)
	fill(b, nc) // every key held and settled: now cached
	compare(b, s, nc)
}

// benchParallel runs SetNX on held keys from GOMAXPROCS goroutines.
func benchParallel(b *testing.B, s store.Store) {
	b.ReportAllocs()
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := int(n.Add(1)) * 7919
		for pb.Next() {
			if err := benchOpsByName["SetNX"](s, i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func benchRedis(b *testing.B) store.Store {
	srv := redistest.Start(b)
	s, err := redisstore.New(srv.Client(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.LoadScripts(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}
