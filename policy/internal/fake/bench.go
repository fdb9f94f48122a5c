package fake

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// BenchKeys is how many keys the benchmarks use.
const BenchKeys = 1024

// BenchKeyNames are the keys the benchmarks use.
var BenchKeyNames = func() []string {
	keys := make([]string, BenchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-key-%04d", i)
	}
	return keys
}()

// Fill stores a settled value under every bench key.
func Fill(b *testing.B, s store.Store) {
	for _, k := range BenchKeyNames {
		if _, _, err := s.SetNX(context.Background(), k, []byte("S-settled-value"), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// storeOp is one benchmarked operation on key i.
type storeOp func(s store.Store, i int) error

var benchOps = map[string]storeOp{
	"SetNX": func(s store.Store, i int) error { // on a held key: the duplicate check
		_, _, err := s.SetNX(context.Background(), BenchKeyNames[i%BenchKeys], []byte("S-new"), time.Hour)
		return err
	},
	"Get": func(s store.Store, i int) error {
		_, err := s.Get(context.Background(), BenchKeyNames[i%BenchKeys])
		return err
	},
}

// Compare measures base and other in alternating chunks of the same run,
// so that a machine's changing load affects both alike. It reports each
// one's mean ns/op and the median, over chunk pairs, of other's time over
// base's (a ratio robust to load bursts).
func Compare(b *testing.B, base, other store.Store) {
	for _, name := range []string{"SetNX", "Get"} {
		op := benchOps[name]
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

// BenchParallel runs SetNX on held keys from GOMAXPROCS goroutines.
func BenchParallel(b *testing.B, s store.Store) {
	b.ReportAllocs()
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := int(n.Add(1)) * 7919
		for pb.Next() {
			if err := benchOps["SetNX"](s, i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchRedis starts a Redis and returns a redisstore on it.
func BenchRedis(b *testing.B) store.Store {
	srv := redistest.Start(b)
	s, err := redisstore.New(srv.Client(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.LoadScripts(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}
