package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestNewEngineObserverOffUnlessSet: the engine starts with no observer,
// and an option passed in sets one.
func TestNewEngineObserverOffUnlessSet(t *testing.T) {
	ctx := context.Background()
	rec := &testkit.Recorder{}
	e := testkit.NewEngine(t, idemkit.WithObserver(rec))
	if err := e.Guard(ctx, "k", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := e.Guard(ctx, "k", func(context.Context) error { return nil }); !errors.Is(err, idemkit.ErrDuplicate) {
		t.Fatalf("second Guard: %v, want ErrDuplicate", err)
	}
	if got := rec.Count(idemkit.EventDuplicate); got != 1 {
		t.Fatalf("Count(EventDuplicate) = %d, want 1", got)
	}
	if got := len(rec.Events()); got < 2 {
		t.Fatalf("%d events, want at least 2", got)
	}
}

// TestNewMemRunsOnTheBubblesClock: a store made inside a synctest bubble
// expires entries on the bubble's fake clock and is closed before the
// bubble ends (or synctest.Test reports its janitor as left over).
func TestNewMemRunsOnTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := testkit.NewMem(t)
		if _, _, err := s.SetNX(ctx, "k", []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour + time.Second)
		if _, err := s.Get(ctx, "k"); err == nil {
			t.Fatal("the entry outlived its TTL on the fake clock")
		}
	})
}

// TestWaitForReturnsOnceTheConditionHolds: WaitFor polls until cond holds,
// calling it again after each miss.
func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	testkit.WaitFor(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

// TestWaitForGivesUpAfterWaitLimit: a condition that never holds fails the
// test once WaitLimit has passed (on the bubble's clock here), naming what
// was awaited.
func TestWaitForGivesUpAfterWaitLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &fatalRecorder{TB: t}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			testkit.WaitFor(ft, "nothing", func() bool { return false })
		}()
		<-done
		if ft.msg != "gave up waiting for nothing after 30s" {
			t.Fatalf("Fatalf(%q), want it to name what was awaited", ft.msg)
		}
		if waited := time.Since(start); waited < testkit.WaitLimit {
			t.Fatalf("gave up after %v, want at least %v", waited, testkit.WaitLimit)
		}
	})
}

// fatalRecorder records the message of Fatalf and ends the goroutine, as
// testing.T's Fatalf does, without failing the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
