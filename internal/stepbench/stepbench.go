// Package stepbench measures what recovery points cost on a store: one
// keyed operation that makes three calls, run as plain work under Do and
// as three Steps under Do, a fresh key per operation. Each store's
// benchmarks call Run, so the figures come from one harness:
//
//	go test -run '^$' -bench 'Steps' -benchtime 2000x ./store/redisstore/
//
// The calls do nothing, so the difference is the steps' own store work:
// per step one read (is it recorded?) and one SetNX (record it).
package stepbench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

var seq atomic.Int64

// Run runs the sub-benchmarks "do" and "steps" over s, and reports
// steps' ns/op as a ratio to do's (x-do) on the steps row.
func Run(b *testing.B, s store.Store) {
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithoutHeartbeat())
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
			for b.Loop() {
				n++
				if _, err := e.Do(ctx, prefix+c.name+strconv.Itoa(n), "", c.fn); err != nil {
					b.Fatal(err)
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if c.name == "do" {
				doNs = ns
			} else if doNs > 0 {
				b.ReportMetric(ns/doNs, "x-do")
			}
		})
	}
}
