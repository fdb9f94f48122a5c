package idemkit_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/memstore"
)

// The engine's benchmarks, each beside the raw primitive it builds on, so
// ratios come from one run:
//
//	go test -run '^$' -bench . -benchmem .
//
// BaselineMutexMap is the floor for Guard (a put-if-absent on a locked map);
// MemstoreGet is the floor for Do's replay.

func benchEngine(b *testing.B) (*idemkit.Engine, *memstore.Store) {
	s := memstore.New(memstore.WithCapacity(1 << 22))
	b.Cleanup(func() { _ = s.Close() })
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithWindow(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	return e, s
}

// keyer hands out fresh keys, the same way in every benchmark.
type keyer struct{ n atomic.Int64 }

func (k *keyer) next() string { return "k" + strconv.FormatInt(k.n.Add(1), 10) }

// runBoth runs op serially and in parallel. The two share one keyer, since
// they share the benchmark's store.
func runBoth(b *testing.B, op func(k *keyer)) {
	var k keyer
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op(&k)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(&k)
			}
		})
	})
}

func BenchmarkBaselineMutexMap(b *testing.B) {
	var mu sync.Mutex
	m := map[string][]byte{}
	runBoth(b, func(k *keyer) {
		key, v := k.next(), []byte("0123456789abcdef")
		mu.Lock()
		if _, ok := m[key]; !ok {
			m[key] = append([]byte(nil), v...)
		}
		mu.Unlock()
	})
}

func BenchmarkGuard(b *testing.B) {
	e, _ := benchEngine(b)
	ctx := context.Background()
	work := func(context.Context) error { return nil }
	runBoth(b, func(k *keyer) {
		if err := e.Guard(ctx, k.next(), work); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkDoFirst(b *testing.B) {
	e, _ := benchEngine(b)
	ctx := context.Background()
	result := []byte(`{"id":"o-1","status":"created"}`)
	work := func(context.Context) ([]byte, error) { return result, nil }
	runBoth(b, func(k *keyer) {
		if _, err := e.Do(ctx, k.next(), "fp", work); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkMemstoreGet(b *testing.B) {
	_, s := benchEngine(b)
	ctx := context.Background()
	if _, _, err := s.SetNX(ctx, "idem:i:replay", make([]byte, 80), time.Hour); err != nil {
		b.Fatal(err)
	}
	runBoth(b, func(*keyer) {
		if _, err := s.Get(ctx, "idem:i:replay"); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkDoReplay(b *testing.B) {
	e, _ := benchEngine(b)
	ctx := context.Background()
	work := func(context.Context) ([]byte, error) { return []byte(`{"id":"o-1","status":"created"}`), nil }
	if _, err := e.Do(ctx, "replay", "fp", work); err != nil {
		b.Fatal(err)
	}
	runBoth(b, func(*keyer) {
		res, err := e.Do(ctx, "replay", "fp", work)
		if err != nil || !res.Replayed {
			b.Fatal("not replayed", err)
		}
	})
}
