package redisstore

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestPXArgument(t *testing.T) {
	s := &Store{}
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{30 * time.Second, "30000"},
		{time.Millisecond, "1"},
		{1500 * time.Microsecond, "2"}, // rounded up, as every TTL the Store keeps
		{30 * time.Second, "30000"},    // back to an earlier TTL
		{time.Nanosecond, "1"},
		{24 * time.Hour, "86400000"},
	} {
		if got := s.px(tc.ttl); got != tc.want {
			t.Errorf("px(%v) = %#v, want %q", tc.ttl, got, tc.want)
		}
	}
}

// A claim's lease and a completion's retention, alternating, are both
// kept: neither allocates again.
func TestPXArgumentRepeatAllocatesNothing(t *testing.T) {
	s := &Store{}
	lease, retention := 30*time.Second, 24*time.Hour
	s.px(lease)
	s.px(retention)
	if n := testing.AllocsPerRun(100, func() { s.px(lease); s.px(retention) }); n != 0 {
		t.Errorf("px with the lease and retention TTLs allocates %v times, want 0", n)
	}
}

// More TTLs than slots still get each its own argument.
func TestPXArgumentManyTTLs(t *testing.T) {
	s := &Store{}
	for round := range 3 {
		for i := 1; i <= 3*pxSlots; i++ {
			ttl := time.Duration(i) * time.Second
			if got, want := s.px(ttl), strconv.Itoa(i*1000); got != want {
				t.Fatalf("round %d: px(%v) = %#v, want %q", round, ttl, got, want)
			}
		}
	}
}

// Goroutines that claim with different TTLs at once each get their own.
func TestPXArgumentConcurrentTTLs(t *testing.T) {
	s := &Store{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ttl := time.Duration(g%4+1) * time.Second
			want := []string{"1000", "2000", "3000", "4000"}[g%4]
			for range 2000 {
				if got := s.px(ttl); got != want {
					t.Errorf("px(%v) = %#v, want %q", ttl, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
