// Package fencetest checks that a store.Store keeps idemkit's fencing
// tokens in order when callers race to take one idempotency key over. It
// uses the standard library and the idemkit engine only, and runs against
// real stores with short real leases (a few hundred milliseconds), so a
// run takes a few seconds of wall time; run it under the race detector.
//
// Run races goroutines at one key: some claims run without a heartbeat
// and stall past their lease, so that another caller takes the key over;
// others keep their lease with a heartbeat through a stall. It checks that
// tokens never repeat and never go backwards (a claim gets a larger token
// than every claim admitted before it began), that a fenced downstream
// (one that refuses a token lower than the highest it has seen) never
// refuses a caller that still holds the key, and that every caller whose
// key was taken over gets ErrLeaseLost from Complete.
//
// RunProcess does the same across processes: the test binary runs itself
// as a child that claims the key and prints its token; the parent stops
// it with SIGSTOP, waits until its lease has ended, takes the key over
// (with a larger token) and completes it, then resumes the child with
// SIGCONT, whose Complete must return ErrLeaseLost. A store's test
// package wires the child in its TestMain:
//
//	func TestMain(m *testing.M) {
//		fencetest.Child(store.Open) // returns unless this process is a child
//		os.Exit(m.Run())
//	}
//
//	func TestFenceProcess(t *testing.T) {
//		fencetest.RunProcess(t, s, url) // s and store.Open(url) share one backend
//	}
//
// A store that one process alone can open (memstore; bbolt, which locks
// its file) runs Run only.
package fencetest
