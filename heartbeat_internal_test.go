package idemkit

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBeatQueueOrder checks the scheduler's heap: after random pushes and
// removals, heartbeats leave in the order they are due, and every index
// matches its position.
func TestBeatQueueOrder(t *testing.T) {
	s := &beats{}
	defer func() {
		if s.timer != nil {
			s.timer.Stop()
		}
	}()
	base := time.Now().Add(time.Hour) // never fires during the test
	var live []*heartbeat
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 500 {
		h := &heartbeat{due: base.Add(time.Duration(rand.IntN(1000)) * time.Millisecond), index: -1}
		s.push(h)
		live = append(live, h)
		if i%3 == 0 {
			j := rand.IntN(len(live))
			s.remove(live[j].index)
			if live[j].index != -1 {
				t.Fatal("a removed heartbeat keeps an index")
			}
			live = slices.Delete(live, j, j+1)
		}
		for k, q := range s.queue {
			if q.index != k {
				t.Fatalf("heartbeat at %d has index %d", k, q.index)
			}
		}
	}
	var got []time.Time
	for len(s.queue) > 0 {
		got = append(got, s.queue[0].due)
		s.remove(0)
	}
	if len(got) != len(live) {
		t.Fatalf("%d heartbeats left the queue, %d were in it", len(got), len(live))
	}
	if !slices.IsSortedFunc(got, func(a, b time.Time) int { return a.Compare(b) }) {
		t.Fatal("heartbeats left the queue out of order")
	}
}
