// Package storetest is the conformance suite every store.Store must pass,
// and a shared set of benchmarks for comparing stores.
//
// A backend package calls Run from one of its tests and Bench from one of
// its benchmarks, handing each a constructor that returns a fresh, empty
// store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := mystore.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Run checks each operation's semantics and errors, argument validation,
// TTL expiry and reporting, value isolation, arbitrary key bytes, context
// cancellation, and atomicity: it races many goroutines at one key and
// counts winners, and races a few goroutines in lockstep over thousands of
// keys. Run it under the race detector. Its TTL tests sleep a few hundred
// milliseconds in total, and each lockstep race stops after about half a
// second against a slow store (a budget that bounds the work, never a
// pass/fail threshold). A subtest holds fewer than 100 keys at a time, so
// a store bounded to a few thousand entries passes. Subtests use fixed key
// names and run one after another, so a constructor may share one backend
// (for example one Redis database) as long as it gives each store its own
// empty key space, by emptying the backend or by a fresh key prefix.
package storetest
