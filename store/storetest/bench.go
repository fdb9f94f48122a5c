package storetest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Benchmark parameters.
const (
	benchTTL     = time.Minute
	benchGetKeys = 1024 // keys read round-robin by the Get benchmark
)

// ctxb is the context of every benchmarked operation.
var ctxb = context.Background()

// benchValue is the 64-byte value every benchmark writes; the
// CompareAndSwap benchmark flips between it and benchValueAlt.
var (
	benchValue    = bytes.Repeat([]byte{'v'}, 64)
	benchValueAlt = bytes.Repeat([]byte{'w'}, 64)
)

// benchCase is one benchmarked operation. prepare runs untimed against a
// fresh store and returns a constructor of per-goroutine operations:
// worker(w) returns the op goroutine w repeats.
type benchCase struct {
	name    string
	prepare func(b *testing.B, s store.Store) (worker func(w int) func() error)
}

// Bench runs the shared benchmarks as sub-benchmarks of b, each serially
// and under b.RunParallel, reporting allocations: SetNX/fresh (a new key
// per op, so allocations include building the key), SetNX/contended (one
// present key), Get (1024 keys round-robin), CompareAndSwap (a key per
// goroutine, flipping between two values), CompareAndDelete and Consume
// (each op is a SetNX that recreates a key plus the measured operation).
// Values are 64 bytes. newStore is called once per run and must return a
// fresh, empty store, registering its own cleanup with b.Cleanup.
func Bench(b *testing.B, newStore func(b *testing.B) store.Store) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			b.Run("serial", func(b *testing.B) { benchSerial(b, bc, newStore(b)) })
			b.Run("parallel", func(b *testing.B) { benchParallel(b, bc, newStore(b)) })
		})
	}
}

func benchCases() []benchCase {
	return []benchCase{
		{"SetNX/fresh", prepareSetNXFresh},
		{"SetNX/contended", prepareSetNXContended},
		{"Get", prepareGet},
		{"CompareAndSwap", prepareCAS},
		{"CompareAndDelete", prepareCAD},
		{"Consume", prepareConsume},
	}
}

func benchSerial(b *testing.B, bc benchCase, s store.Store) {
	op := bc.prepare(b, s)(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchParallel(b *testing.B, bc benchCase, s store.Store) {
	worker := bc.prepare(b, s)
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		op := worker(int(workers.Add(1)))
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// errBench reports a benchmarked operation with an outcome it should not
// have; the benchmark's own setup guarantees the expected one.
var errBench = errors.New("storetest: benchmark operation had an unexpected outcome")

func prepareSetNXFresh(_ *testing.B, s store.Store) func(int) func() error {
	return func(w int) func() error {
		prefix := []byte("fresh:" + strconv.Itoa(w) + ":")
		var n int64
		return func() error {
			n++
			key := string(strconv.AppendInt(prefix, n, 10))
			set, _, err := s.SetNX(ctxb, key, benchValue, benchTTL)
			return outcome(set, err)
		}
	}
}

func prepareSetNXContended(b *testing.B, s store.Store) func(int) func() error {
	benchSet(b, s, "contended")
	return func(int) func() error {
		return func() error {
			set, _, err := s.SetNX(ctxb, "contended", benchValue, benchTTL)
			return outcome(!set, err)
		}
	}
}

func prepareGet(b *testing.B, s store.Store) func(int) func() error {
	keys := make([]string, benchGetKeys)
	for i := range keys {
		keys[i] = "get:" + strconv.Itoa(i)
		benchSet(b, s, keys[i])
	}
	return func(w int) func() error {
		i := w * 97
		return func() error {
			i++
			_, err := s.Get(ctxb, keys[i%benchGetKeys])
			return err
		}
	}
}

func prepareCAS(_ *testing.B, s store.Store) func(int) func() error {
	return func(w int) func() error {
		key := "cas:" + strconv.Itoa(w)
		cur, next := benchValue, benchValueAlt
		_, _, err := s.SetNX(ctxb, key, cur, benchTTL)
		return func() error {
			if err != nil {
				return err
			}
			ok, err := s.CompareAndSwap(ctxb, key, cur, next, benchTTL)
			cur, next = next, cur
			return outcome(ok, err)
		}
	}
}

func prepareCAD(_ *testing.B, s store.Store) func(int) func() error {
	return func(w int) func() error {
		key := "cad:" + strconv.Itoa(w)
		return func() error {
			set, _, err := s.SetNX(ctxb, key, benchValue, benchTTL)
			if err := outcome(set, err); err != nil {
				return err
			}
			return outcome(s.CompareAndDelete(ctxb, key, benchValue))
		}
	}
}

func prepareConsume(_ *testing.B, s store.Store) func(int) func() error {
	return func(w int) func() error {
		key := "consume:" + strconv.Itoa(w)
		return func() error {
			set, _, err := s.SetNX(ctxb, key, benchValue, benchTTL)
			if err := outcome(set, err); err != nil {
				return err
			}
			_, err = s.Consume(ctxb, key)
			return err
		}
	}
}

// benchSet stores benchValue under an absent key during preparation.
func benchSet(b *testing.B, s store.Store, key string) {
	b.Helper()
	set, _, err := s.SetNX(ctxb, key, benchValue, benchTTL)
	if err := outcome(set, err); err != nil {
		b.Fatal(err)
	}
}

// outcome turns an operation's result into an error: err itself, or
// errBench when the operation did not have the expected outcome.
func outcome(expected bool, err error) error {
	switch {
	case err != nil:
		return err
	case !expected:
		return errBench
	}
	return nil
}
