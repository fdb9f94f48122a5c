package redisstore

import (
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

func TestPXArgumentRepeatAllocatesNothing(t *testing.T) {
	s := &Store{}
	ttl := 30 * time.Second
	s.px(ttl)
	if n := testing.AllocsPerRun(100, func() { s.px(ttl) }); n != 0 {
		t.Errorf("px with the last TTL allocates %v times, want 0", n)
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
