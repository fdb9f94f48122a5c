package boltstore_test

import (
	"context"
	"path/filepath"
	"strconv"
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
