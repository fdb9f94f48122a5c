package memstore_test

import (
	"bytes"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// BenchmarkStore runs the shared store benchmarks against a default Store.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return newStore(b) })
}

// BenchmarkStoreWithScopeQuota runs the shared store benchmarks against a
// Store with a scope quota: SetNX/fresh writes each worker's keys into one
// scope ("fresh:<worker>"), held at its quota of 1000 by evicting its own
// entries; the other benchmarks' keys have no scope.
func BenchmarkStoreWithScopeQuota(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		return newStore(b, memstore.WithScopeQuota(1000, scopeOf))
	})
}

// baseline is the floor a Store is measured against: one mutex around one
// map, with the value copy-in and copy-out the contract requires and the
// same capacity bound (a full map is simply cleared). It has no TTLs, no
// LRU order, no sharding and no validation.
type baseline struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newBaseline() *baseline {
	return &baseline{m: make(map[string][]byte)}
}

// putIfAbsent stores value under key unless key is present, in which case
// it returns a copy of the present value.
func (bl *baseline) putIfAbsent(key string, value []byte) (bool, []byte) {
	bl.mu.Lock()
	if v, ok := bl.m[key]; ok {
		bl.mu.Unlock()
		return false, slices.Clone(v)
	}
	if len(bl.m) >= memstore.DefaultCapacity {
		clear(bl.m)
	}
	bl.m[key] = slices.Clone(value)
	bl.mu.Unlock()
	return true, nil
}

// get returns a copy of the value under key, if any.
func (bl *baseline) get(key string) ([]byte, bool) {
	bl.mu.Lock()
	v, ok := bl.m[key]
	bl.mu.Unlock()
	return slices.Clone(v), ok
}

// take removes key and returns its value, if any.
func (bl *baseline) take(key string) ([]byte, bool) {
	bl.mu.Lock()
	v, ok := bl.m[key]
	delete(bl.m, key)
	bl.mu.Unlock()
	return slices.Clone(v), ok
}

// baselineValue matches the 64-byte value of storetest.Bench.
var baselineValue = bytes.Repeat([]byte{'v'}, 64)

// BenchmarkBaseline measures put-if-absent, get and take on a
// mutex-guarded map, with keys built as storetest.Bench builds them, so
// that SetNX/fresh, SetNX/contended, Get and Consume of BenchmarkStore can
// be read as ratios over this floor.
func BenchmarkBaseline(b *testing.B) {
	b.Run("SetNX/fresh/serial", func(b *testing.B) { runBaseline(b, false, freshOp) })
	b.Run("SetNX/fresh/parallel", func(b *testing.B) { runBaseline(b, true, freshOp) })
	b.Run("SetNX/contended/serial", func(b *testing.B) { runBaseline(b, false, contendedOp) })
	b.Run("SetNX/contended/parallel", func(b *testing.B) { runBaseline(b, true, contendedOp) })
	b.Run("Get/serial", func(b *testing.B) { runBaseline(b, false, getOp) })
	b.Run("Get/parallel", func(b *testing.B) { runBaseline(b, true, getOp) })
	b.Run("Consume/serial", func(b *testing.B) { runBaseline(b, false, consumeOp) })
	b.Run("Consume/parallel", func(b *testing.B) { runBaseline(b, true, consumeOp) })
}

// getOp returns worker w's op reading 1024 present keys round-robin, as
// storetest.Bench's Get does.
func getOp(bl *baseline, w int) func() bool {
	const n = 1024
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "get:" + strconv.Itoa(i)
		bl.putIfAbsent(keys[i], baselineValue)
	}
	i := w * 97
	return func() bool {
		i++
		_, ok := bl.get(keys[i%n])
		return ok
	}
}

// consumeOp returns worker w's op storing and then taking its own key, as
// storetest.Bench's Consume does.
func consumeOp(bl *baseline, w int) func() bool {
	key := "consume:" + strconv.Itoa(w)
	return func() bool {
		set, _ := bl.putIfAbsent(key, baselineValue)
		_, ok := bl.take(key)
		return set && ok
	}
}

// freshOp returns worker w's op inserting a new key each time.
func freshOp(bl *baseline, w int) func() bool {
	prefix := []byte("fresh:" + strconv.Itoa(w) + ":")
	var n int64
	return func() bool {
		n++
		set, _ := bl.putIfAbsent(string(strconv.AppendInt(prefix, n, 10)), baselineValue)
		return set
	}
}

// contendedOp returns an op hitting one present key.
func contendedOp(bl *baseline, _ int) func() bool {
	bl.putIfAbsent("contended", baselineValue)
	return func() bool {
		set, _ := bl.putIfAbsent("contended", baselineValue)
		return !set
	}
}

func runBaseline(b *testing.B, parallel bool, makeOp func(*baseline, int) func() bool) {
	bl := newBaseline()
	b.ReportAllocs()
	if !parallel {
		op := makeOp(bl, 0)
		b.ResetTimer()
		for range b.N {
			if !op() {
				b.Fatal("unexpected outcome")
			}
		}
		return
	}
	var workers atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		op := makeOp(bl, int(workers.Add(1)))
		for pb.Next() {
			if !op() {
				b.Error("unexpected outcome")
				return
			}
		}
	})
}
