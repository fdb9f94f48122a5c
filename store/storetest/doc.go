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
// cancellation, and atomicity by racing many goroutines at one key and
// counting winners. Run it under the race detector. Its TTL tests sleep a
// few hundred milliseconds in total; subtests run one after another, so a
// constructor may share one backend (for example one Redis database) as
// long as it empties it.
package storetest
