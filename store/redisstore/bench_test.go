package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/stepbench"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// benchParallelism makes b.RunParallel run 32 goroutines per GOMAXPROCS:
// 64 callers on a 2-core machine.
const benchParallelism = 32

var benchValue = bytes.Repeat([]byte{'v'}, 64)

// rawSetNX is a minimal SetNX script with the Store's semantics (the
// existing value and PTTL when the key is present): a baseline that
// separates the server's Lua cost from the Store's own.
var rawSetNX = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}`)

// rawCAD is a minimal compare-and-delete script, the baseline that
// Store.CompareAndDelete is measured against.
var rawCAD = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// benchClient starts a server and returns a client sized for 64 callers.
func benchClient(b *testing.B) *redis.Client {
	opts := redistest.Start(b).Options()
	opts.PoolSize = benchParallelism * runtime.GOMAXPROCS(0)
	c := redis.NewClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// runBoth runs op as a "serial" and a "parallel" sub-benchmark. op gets a
// number unique across all calls. Each also reports srv-us/call: the
// server's own time per call of cmd (INFO commandstats), which machine
// load disturbs less than the wall-clock ns/op.
func runBoth(b *testing.B, c *redis.Client, cmd string, op func(b *testing.B, n int64)) {
	var seq atomic.Int64
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		resetStats(b, c)
		for b.Loop() {
			op(b, seq.Add(1))
		}
		reportServerTime(b, c, cmd)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(benchParallelism)
		resetStats(b, c)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(b, seq.Add(1))
			}
		})
		reportServerTime(b, c, cmd)
	})
}

func resetStats(b *testing.B, c *redis.Client) {
	if err := c.ConfigResetStat(ctxb).Err(); err != nil {
		b.Fatal(err)
	}
}

// reportServerTime reports usec_per_call of cmd from INFO commandstats.
func reportServerTime(b *testing.B, c *redis.Client, cmd string) {
	b.StopTimer()
	info, err := c.Info(ctxb, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(f, "srv-us/call")
				return
			}
		}
	}
	b.Fatalf("no commandstats for %s in %q", cmd, info)
}

// BenchmarkSetNX compares Store.SetNX (MULTI/EXEC on Redis 7.0 and later,
// and the Lua script forced) with go-redis SetNX (SET NX PX, which does
// not return the existing entry) and with EVALSHA of a minimal script
// that does, a fresh key per operation, so every call stores. srv-us/call
// is that of EXEC or EVALSHA, which includes the commands run inside.
func BenchmarkSetNX(b *testing.B) {
	c := benchClient(b)
	s, err := redisstore.New(c)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.LoadScripts(ctxb); err != nil {
		b.Fatal(err)
	}
	b.Run("raw", func(b *testing.B) {
		runBoth(b, c, "set", func(b *testing.B, n int64) {
			if err := c.SetNX(ctxb, "raw:"+strconv.FormatInt(n, 10), benchValue, time.Minute).Err(); err != nil {
				b.Error(err)
			}
		})
	})
	if err := rawSetNX.Load(ctxb, c).Err(); err != nil {
		b.Fatal(err)
	}
	b.Run("rawscript", func(b *testing.B) {
		runBoth(b, c, "evalsha", func(b *testing.B, n int64) {
			err := c.EvalSha(ctxb, rawSetNX.Hash(), []string{"rs:" + strconv.FormatInt(n, 10)}, benchValue, 60000).Err()
			if err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("store", func(b *testing.B) {
		runBoth(b, c, "exec", func(b *testing.B, n int64) {
			if _, _, err := s.SetNX(ctxb, "st:"+strconv.FormatInt(n, 10), benchValue, time.Minute); err != nil {
				b.Error(err)
			}
		})
	})
	scripts, err := redisstore.New(c)
	if err != nil {
		b.Fatal(err)
	}
	redisstore.UseScripts(scripts)
	b.Run("store-scripts", func(b *testing.B) {
		runBoth(b, c, "evalsha", func(b *testing.B, n int64) {
			if _, _, err := scripts.SetNX(ctxb, "ss:"+strconv.FormatInt(n, 10), benchValue, time.Minute); err != nil {
				b.Error(err)
			}
		})
	})
}

// BenchmarkCompareAndDelete compares Store.CompareAndDelete with a minimal
// EVALSHA compare-and-delete script. Each op targets one of 1024 present
// keys with a value that does not match, so both do the same GET and
// compare and leave the keys in place.
func BenchmarkCompareAndDelete(b *testing.B) {
	c := benchClient(b)
	s, err := redisstore.New(c)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.LoadScripts(ctxb); err != nil {
		b.Fatal(err)
	}
	if err := rawCAD.Load(ctxb, c).Err(); err != nil {
		b.Fatal(err)
	}
	const keys = 1024
	names := make([]string, keys)
	for i := range names {
		names[i] = "cad:" + strconv.Itoa(i)
		if err := c.Set(ctxb, names[i], benchValue, time.Hour).Err(); err != nil {
			b.Fatal(err)
		}
	}
	other := []byte("not-the-value")
	b.Run("raw", func(b *testing.B) {
		runBoth(b, c, "evalsha", func(b *testing.B, n int64) {
			if err := c.EvalSha(ctxb, rawCAD.Hash(), []string{names[n%keys]}, other).Err(); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("store", func(b *testing.B) {
		runBoth(b, c, "evalsha", func(b *testing.B, n int64) {
			if _, err := s.CompareAndDelete(ctxb, names[n%keys], other); err != nil {
				b.Error(err)
			}
		})
	})
}

// BenchmarkStoretest runs the shared store benchmarks against Redis.
func BenchmarkStoretest(b *testing.B) {
	c := benchClient(b)
	storetest.Bench(b, func(b *testing.B) store.Store { return newStore(b, c) })
}

// BenchmarkClaim100 claims 100 fresh keys per iteration, as one
// SetNXBatch and as 100 SetNX calls, in the same run:
//
//	go test -run '^$' -bench Claim100 -benchmem ./store/redisstore/
func BenchmarkClaim100(b *testing.B) {
	c := benchClient(b)
	s, err := redisstore.New(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	value := []byte("claim-value-0123456789")
	var round int
	items := func() []store.BatchItem {
		round++
		out := make([]store.BatchItem, 100)
		for i := range out {
			out[i] = store.BatchItem{Key: fmt.Sprintf("claim100:%d:%d", round, i), Value: value, TTL: time.Minute}
		}
		return out
	}
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.SetNXBatch(ctx, items()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("single", func(b *testing.B) {
		for b.Loop() {
			for _, it := range items() {
				if _, _, err := s.SetNX(ctx, it.Key, it.Value, it.TTL); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkSteps: a keyed operation making three calls, as plain work and
// as three recovery points (internal/stepbench), over Redis.
func BenchmarkSteps(b *testing.B) {
	s, err := redisstore.New(benchClient(b))
	if err != nil {
		b.Fatal(err)
	}
	stepbench.Run(b, s)
}
