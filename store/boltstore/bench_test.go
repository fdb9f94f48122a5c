package boltstore_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// benchParallelism times GOMAXPROCS is the number of concurrent callers
// in the parallel benchmarks: 64 on a 2-core machine.
const benchParallelism = 32

var (
	benchValue  = make([]byte, 32)
	benchBucket = []byte("bench")
	benchKeys   atomic.Int64
)

// nextKey returns a key no benchmark has used yet.
func nextKey() []byte {
	return strconv.AppendInt([]byte("key-"), benchKeys.Add(1), 10)
}

func openRaw(b *testing.B, noSync bool) *bolt.DB {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{NoSync: noSync})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	require.NoError(b, db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(benchBucket)
		return err
	}))
	return db
}

// putIfAbsent is the minimal raw bbolt baseline of SetNX.
func putIfAbsent(key []byte) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		b := tx.Bucket(benchBucket)
		if b.Get(key) != nil {
			return nil
		}
		return b.Put(key, benchValue)
	}
}

func openBenchStore(b *testing.B, noSync bool) *boltstore.Store {
	b.Helper()
	opts := []boltstore.Option{boltstore.WithoutSweeper()}
	if noSync {
		opts = append(opts, boltstore.WithNoSync())
	}
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "store.db"), opts...)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// syncModes are the durability settings every benchmark runs under.
var syncModes = []struct {
	name   string
	noSync bool
}{{"fsync", false}, {"nosync", true}}

func BenchmarkRawUpdate(b *testing.B) {
	for _, m := range syncModes {
		b.Run(m.name+"/serial", func(b *testing.B) {
			db := openRaw(b, m.noSync)
			for b.Loop() {
				if err := db.Update(putIfAbsent(nextKey())); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(m.name+"/parallel64", func(b *testing.B) {
			db := openRaw(b, m.noSync)
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := db.Update(putIfAbsent(nextKey())); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkRawBatch(b *testing.B) {
	for _, m := range syncModes {
		b.Run(m.name+"/parallel64", func(b *testing.B) {
			db := openRaw(b, m.noSync)
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := db.Batch(putIfAbsent(nextKey())); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkSetNX(b *testing.B) {
	ctx := context.Background()
	for _, m := range syncModes {
		b.Run(m.name+"/serial", func(b *testing.B) {
			s := openBenchStore(b, m.noSync)
			for b.Loop() {
				if _, _, err := s.SetNX(ctx, string(nextKey()), benchValue, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(m.name+"/parallel64", func(b *testing.B) {
			s := openBenchStore(b, m.noSync)
			b.SetParallelism(benchParallelism)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := s.SetNX(ctx, string(nextKey()), benchValue, time.Hour); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkConformance runs the shared store benchmarks (fsync on).
func BenchmarkConformance(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		return openBenchStore(b, false)
	})
}

// claimsPerOp is the number of claims each way of BenchmarkClaim100
// makes per iteration.
const claimsPerOp = 100

// BenchmarkClaim100 makes 100 claims of fresh keys three ways in every
// iteration, fsync on, interleaved so that a machine's changing load
// falls on all three alike: as one SetNXBatch (one transaction, one
// flush), as 100 SetNX one after another (100 flushes), and as 100 SetNX
// from 100 goroutines (which the committer groups). It reports the time
// of each way per 100 claims and the batch's speed-up over the others.
func BenchmarkClaim100(b *testing.B) {
	ctx := context.Background()
	s := openBenchStore(b, false)
	items := make([]store.BatchItem, claimsPerOp)
	var batch, serial, concurrent time.Duration
	for b.Loop() {
		for i := range items {
			items[i] = store.BatchItem{Key: string(nextKey()), Value: benchValue, TTL: time.Hour}
		}
		batch += timed(func() {
			if res, err := s.SetNXBatch(ctx, items); err != nil || !res[claimsPerOp-1].Set {
				b.Fatal(err)
			}
		})
		serial += timed(func() {
			for range claimsPerOp {
				if set, _, err := s.SetNX(ctx, string(nextKey()), benchValue, time.Hour); err != nil || !set {
					b.Fatal(err)
				}
			}
		})
		concurrent += timed(func() { claimConcurrently(b, s) })
	}
	n := float64(b.N)
	b.ReportMetric(float64(batch.Microseconds())/n, "batch-us/100")
	b.ReportMetric(float64(serial.Microseconds())/n, "serial-us/100")
	b.ReportMetric(float64(concurrent.Microseconds())/n, "concurrent-us/100")
	b.ReportMetric(float64(serial)/float64(batch), "x-vs-serial")
	b.ReportMetric(float64(concurrent)/float64(batch), "x-vs-concurrent")
}

// timed returns how long f took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// claimConcurrently makes claimsPerOp claims with SetNX, one goroutine
// each, and waits for them.
func claimConcurrently(b *testing.B, s *boltstore.Store) {
	var wg sync.WaitGroup
	for range claimsPerOp {
		wg.Go(func() {
			if set, _, err := s.SetNX(context.Background(), string(nextKey()), benchValue, time.Hour); err != nil || !set {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}
