package backoff

import (
	"math"
	"testing"
	"time"
)

func TestCeilingDoublesUpToTheLimit(t *testing.T) {
	cases := []struct {
		base, limit time.Duration
		attempt     int
		want        time.Duration
	}{
		{100 * time.Millisecond, 5 * time.Second, 0, 100 * time.Millisecond},
		{100 * time.Millisecond, 5 * time.Second, 1, 200 * time.Millisecond},
		{100 * time.Millisecond, 5 * time.Second, 5, 3200 * time.Millisecond},
		{100 * time.Millisecond, 5 * time.Second, 6, 5 * time.Second},
		{100 * time.Millisecond, 5 * time.Second, 1000, 5 * time.Second},
		{time.Second, 500 * time.Millisecond, 0, 500 * time.Millisecond},
		{math.MaxInt64 / 3, math.MaxInt64, 4, math.MaxInt64},
		{0, time.Second, 3, 0},
		{time.Second, 0, 3, 0},
	}
	for _, c := range cases {
		if got := Ceiling(c.base, c.limit, c.attempt); got != c.want {
			t.Errorf("Ceiling(%v, %v, %d) = %v, want %v", c.base, c.limit, c.attempt, got, c.want)
		}
	}
}

func TestDelayStaysInTheUpperHalf(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := Delay(100*time.Millisecond, time.Second, 2)
		if d < 200*time.Millisecond || d > 400*time.Millisecond {
			t.Fatalf("Delay = %v, want within [200ms, 400ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct delays in 1000 draws: no jitter", len(seen))
	}
	if d := Delay(0, time.Second, 1); d != 0 {
		t.Fatalf("Delay with no base = %v, want 0", d)
	}
}
