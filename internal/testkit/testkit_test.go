package testkit_test

import (
	"context"
	"errors"
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
