package delivery

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testkit"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	b := Backoff{First: time.Second, Max: 10 * time.Second, Attempts: 5}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for attempt, w := range want {
		if d := b.Delay(attempt); d != w {
			t.Errorf("Delay(%d) = %v, want %v", attempt, d, w)
		}
	}
	if d := (Backoff{First: time.Hour, Max: 1 << 62}).Delay(1000); d != 1<<62 {
		t.Errorf("Delay(1000) = %v, want the cap", d)
	}
	for attempt, w := range map[int]bool{0: false, 1: false, 4: false, 5: true, 6: true} {
		if got := b.Exhausted(attempt); got != w {
			t.Errorf("Exhausted(%d) = %v, want %v", attempt, got, w)
		}
	}
	if (Backoff{}).Exhausted(1 << 30) {
		t.Error("Attempts 0 bounds nothing")
	}
}

// A failing effect is retried with growing delays, then dropped on its
// last attempt; a store failure (the effect did not run) never exhausts.
func TestOneFailingEffectIsDroppedOnTheLastAttempt(t *testing.T) {
	p := newProcessor(t, testkit.NewMem(t), Config{Backoff: Backoff{First: time.Second, Max: 3 * time.Second, Attempts: 4}})
	var n atomic.Int64
	ctx := context.Background()
	for attempt, want := range []time.Duration{1: time.Second, 2: 2 * time.Second, 3: 3 * time.Second} {
		if attempt == 0 {
			continue
		}
		v := p.One(ctx, Request{Key: "m", Attempt: attempt, Run: effect(&n, errors.New("db timeout"))})
		if v.Action != Retry || v.Delay != want || v.Exhausted {
			t.Fatalf("attempt %d: %+v, want a retry after %v", attempt, v, want)
		}
	}
	v := p.One(ctx, Request{Key: "m", Attempt: 4, Run: effect(&n, errors.New("db timeout"))})
	if v.Action != Drop || !v.Exhausted || !v.Ran || v.Err == nil {
		t.Fatalf("last attempt: %+v, want an exhausted drop", v)
	}
	if n.Load() != 4 {
		t.Fatalf("effect ran %d times, want 4", n.Load())
	}
	if v := p.retry(errors.New("store down"), false, 99); v.Action != Retry || v.Exhausted || v.Delay != 3*time.Second {
		t.Fatalf("store failure on attempt 99: %+v, want a retry at the cap", v)
	}
}
