package idemkit_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/stepbench"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/memstore"
)

// The engine's benchmarks, each beside the raw primitive it builds on, so
// ratios come from one run:
//
//	go test -run '^$' -bench . -benchmem .
//
// BaselineMutexMap is the floor for Guard (a put-if-absent on a locked map);
// MemstoreGet is the floor for Do's replay.

func benchEngine(b *testing.B, opts ...idemkit.Option) (*idemkit.Engine, *memstore.Store) {
	s := testkit.NewMem(b, memstore.WithCapacity(1<<22), memstore.WithMaxBytes(4<<30)) // nothing evicted during a run
	e, err := idemkit.New(s, append([]idemkit.Option{idemkit.WithObserver(nil), idemkit.WithWindow(time.Hour)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return e, s
}

// keyer hands out fresh keys, the same way in every benchmark. Each
// goroutine has its own (no shared counter to contend on); the prefix keeps
// their keys apart.
type keyer struct {
	prefix string
	n      int64
}

func (k *keyer) next() string {
	k.n++
	return k.prefix + strconv.FormatInt(k.n, 10)
}

// runBoth runs op serially and in parallel, each goroutine with a keyer of
// its own. Runs share the benchmark's store, so every keyer gets a fresh
// prefix.
func runBoth(b *testing.B, op func(k *keyer)) {
	var ids atomic.Int64
	newKeyer := func() *keyer { return &keyer{prefix: "k" + strconv.FormatInt(ids.Add(1), 10) + "-"} }
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		k := newKeyer()
		for b.Loop() {
			op(k)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			k := newKeyer()
			for pb.Next() {
				op(k)
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

// The steady-state pair: every op claims a fresh key and releases it, so
// memory stays flat and the figures show per-op cost and parallel scaling
// rather than the garbage collector walking millions of live keys.

func BenchmarkBaselineMutexMapClaimRelease(b *testing.B) {
	var mu sync.Mutex
	m := map[string][]byte{}
	runBoth(b, func(k *keyer) {
		key, v := k.next(), []byte("0123456789abcdef")
		mu.Lock()
		if _, ok := m[key]; !ok {
			m[key] = append([]byte(nil), v...)
		}
		mu.Unlock()
		mu.Lock()
		if string(m[key]) == string(v) {
			delete(m, key)
		}
		mu.Unlock()
	})
}

func BenchmarkGuardReleaseOnDone(b *testing.B) {
	e, _ := benchEngine(b, idemkit.WithRelease(idemkit.ReleaseOnDone))
	ctx := context.Background()
	work := func(context.Context) error { return nil }
	runBoth(b, func(k *keyer) {
		if err := e.Guard(ctx, k.next(), work); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkMemstoreClaimRelease is the same claim and release made
// directly on memstore, to tell the engine's cost from the store's.
func BenchmarkMemstoreClaimRelease(b *testing.B) {
	_, s := benchEngine(b)
	ctx := context.Background()
	runBoth(b, func(k *keyer) {
		key, v := "idem:g:"+k.next(), []byte("K0123456789abcdef")
		if set, _, err := s.SetNX(ctx, key, v, time.Hour); err != nil || !set {
			b.Fatal("not set", err)
		}
		if ok, err := s.CompareAndDelete(ctx, key, v); err != nil || !ok {
			b.Fatal("not deleted", err)
		}
	})
}

// BenchmarkDoReplayManyKeys replays 4096 completed keys in turn, so
// parallel callers spread over memstore's shards: it shows how replays
// scale across cores when they do not all hit one key.
func BenchmarkDoReplayManyKeys(b *testing.B) {
	e, _ := benchEngine(b)
	ctx := context.Background()
	work := func(context.Context) ([]byte, error) { return []byte(`{"id":"o-1","status":"created"}`), nil }
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "replay-" + strconv.Itoa(i)
		if _, err := e.Do(ctx, keys[i], "fp", work); err != nil {
			b.Fatal(err)
		}
	}
	runBoth(b, func(k *keyer) {
		k.n++
		res, err := e.Do(ctx, keys[k.n%int64(len(keys))], "fp", work)
		if err != nil || !res.Replayed {
			b.Fatal("not replayed", err)
		}
	})
}

// BenchmarkSteps: a keyed operation making three calls, as plain work and
// as three recovery points (internal/stepbench), over memstore.
func BenchmarkSteps(b *testing.B) {
	s, _ := benchEngine(b)
	stepbench.Run(b, s.Store())
}
