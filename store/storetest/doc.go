// Package storetest is the conformance suite every store.Store must pass,
// and a shared set of benchmarks for comparing stores. It uses the
// standard library only.
//
// A backend's tests call Run with a constructor of fresh, empty stores;
// Check runs the same cases outside go test and returns the violations.
// Each broken rule is reported with the rule quoted from package store's
// documentation, and a case goes on after a failure while its remaining
// checks still mean something, as testing/slogtest does:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := mystore.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Bench runs the shared benchmarks; Unavailable is a store whose backend is
// down, for testing what an application does then.
//
// # What the suite checks
//
// Each operation's semantics and errors, argument validation, TTL expiry
// and reporting, value isolation, arbitrary key bytes, context
// cancellation, and atomicity: it races 64 goroutines at one key and counts
// winners, and races a few goroutines in lockstep over thousands of keys.
// When the store implements store.Batcher it also checks batches: mixed
// new, held and expired keys, keys repeated in one batch, invalid items,
// and overlapping batches raced from 16 goroutines, alone and against
// single SetNX calls, with exactly one winner per key. When it implements
// store.SetNXValuer it checks SetNXValue the same way: stored and existing
// values, expiry consistent with SetNX, invalid arguments, isolation, a
// done context, and 64 goroutines (half calling SetNX) racing at one key,
// in rounds and in lockstep, with exactly one winner. Run it under the
// race detector.
//
// # Time and space
//
// The TTL cases sleep a few hundred milliseconds in total, and each
// lockstep race stops after about half a second against a slow store (a
// budget that bounds the work, never a pass/fail threshold). A case holds
// fewer than 100 keys at a time, so a store bounded to a few thousand
// entries passes. Cases use fixed key names and run one after another, so
// a constructor may share one backend (for example one Redis database) as
// long as it gives each store its own empty key space, by emptying the
// backend or by a fresh key prefix.
package storetest
