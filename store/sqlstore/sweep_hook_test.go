package sqlstore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestSweepHookPanicIsRecovered registers a WithOnSweep hook that panics
// on every call. The panic must neither kill the process (it runs on the
// sweeper's own goroutine, where nothing else could recover it) nor stop
// the sweeper: the hook keeps being called, expired rows keep going, and
// Close still stops the sweeper.
func TestSweepHookPanicIsRecovered(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			table := freshTable(t, b)
			var calls atomic.Int32
			s, err := sqlstore.New(b.db, b.dialect, sqlstore.WithTable(table),
				sqlstore.WithSweepInterval(5*time.Millisecond),
				sqlstore.WithOnSweep(func(int64, error) {
					calls.Add(1)
					panic("metrics backend gone")
				}))
			if err != nil {
				t.Fatal(err)
			}
			mustSet(t, s, "k", []byte("v"), time.Millisecond)
			deadline := time.Now().Add(20 * time.Second)
			for calls.Load() < 3 || rowCount(t, b, table) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("after 20s: %d hook calls, %d rows; want at least 3 calls and the expired row swept",
						calls.Load(), rowCount(t, b, table))
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if n := sweepers(); n != 0 {
				t.Fatalf("%d sweeper goroutines after Close, want 0", n)
			}
		})
	}
}
