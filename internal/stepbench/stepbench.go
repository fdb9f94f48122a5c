// Package stepbench measures what recovery points cost on a store: one
// keyed operation that makes three calls, run as plain work under Do and
// as three Steps under Do, a fresh key per operation. Each store's
// benchmarks call Run, so the figures come from one harness:
//
//	go test -run '^$' -bench 'Steps' -benchtime 2000x ./store/redisstore/
//
// The calls do nothing, so the difference is the steps' own store work:
// per step one SetNX (record it) in a run that began its operation, and
// one read first in a retry that took it over.
package stepbench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

var seq atomic.Int64

// counting is a store that counts its calls: each is one round trip on a
// networked store.
type counting struct {
	store.Store
	n atomic.Int64
}

func (c *counting) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	c.n.Add(1)
	return c.Store.SetNX(ctx, k, v, ttl)
}

func (c *counting) Get(ctx context.Context, k string) (store.Entry, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, k)
}

func (c *counting) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	c.n.Add(1)
	return c.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

func (c *counting) CompareAndDelete(ctx context.Context, k string, old []byte) (bool, error) {
	c.n.Add(1)
	return c.Store.CompareAndDelete(ctx, k, old)
}

func (c *counting) Consume(ctx context.Context, k string) ([]byte, error) {
	c.n.Add(1)
	return c.Store.Consume(ctx, k)
}

// Run runs the sub-benchmarks "do" and "steps" over s, and reports the
// store calls per operation (store-calls/op: round trips on a networked
// store) and, on the steps row, steps' ns/op as a ratio to do's (x-do).
func Run(b *testing.B, s store.Store) {
	cs := &counting{Store: s}
	e, err := idemkit.New(cs, idemkit.WithObserver(nil), idemkit.WithoutHeartbeat())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	call := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	names := [3]string{"reserve", "charge", "mark paid"}
	plain := func(ctx context.Context) ([]byte, error) {
		for range names {
			if _, err := call(ctx); err != nil {
				return nil, err
			}
		}
		return []byte("done"), nil
	}
	steps := func(ctx context.Context) ([]byte, error) {
		for _, n := range names {
			if _, err := idemkit.Step(ctx, n, call); err != nil {
				return nil, err
			}
		}
		return []byte("done"), nil
	}
	prefix := "stepbench-" + strconv.FormatInt(seq.Add(1), 10) + "-"
	var doNs float64
	for _, c := range []struct {
		name string
		fn   func(context.Context) ([]byte, error)
	}{{"do", plain}, {"steps", steps}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			calls := cs.n.Load()
			for b.Loop() {
				n++
				if _, err := e.Do(ctx, prefix+c.name+strconv.Itoa(n), "", c.fn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cs.n.Load()-calls)/float64(b.N), "store-calls/op")
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if c.name == "do" {
				doNs = ns
			} else if doNs > 0 {
				b.ReportMetric(ns/doNs, "x-do")
			}
		})
	}
}
