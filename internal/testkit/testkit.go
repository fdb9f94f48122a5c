// Package testkit holds the helpers idemkit's own tests share, written once:
// a memory store and an engine that end with the test, an observer that
// records the events it sees, and a wait for a condition that real
// processes, servers or files bring about.
//
// Inside a testing/synctest bubble, call them with the bubble's *testing.T:
// the store's janitor and the engine's heartbeats then start in the bubble
// and run on its fake clock, and the store is closed, by T.Cleanup, before
// the bubble ends.
package testkit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// NewMem returns a memory store built with opts, closed when tb ends. It
// fails tb at once if the options are refused.
func NewMem(tb testing.TB, opts ...memstore.Option) *memstore.Store {
	tb.Helper()
	s, err := memstore.New(opts...)
	if err != nil {
		tb.Fatalf("testkit: memstore.New: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// NewEngine returns an engine over a fresh memory store (see NewMem) with
// the observer off, then opts applied, so an option may set one. It fails
// tb at once if the options are refused.
func NewEngine(tb testing.TB, opts ...idemkit.Option) *idemkit.Engine {
	tb.Helper()
	return NewEngineOn(tb, NewMem(tb), opts...)
}

// NewEngineOn returns an engine over s with the observer off, then opts
// applied. It fails tb at once if the options are refused.
func NewEngineOn(tb testing.TB, s store.Store, opts ...idemkit.Option) *idemkit.Engine {
	tb.Helper()
	e, err := idemkit.New(s, append([]idemkit.Option{idemkit.WithObserver(nil)}, opts...)...)
	if err != nil {
		tb.Fatalf("testkit: idemkit.New: %v", err)
	}
	return e
}

// Recorder is an idemkit.Observer that keeps every event it is given, safe
// for concurrent use. The zero value is ready.
type Recorder struct {
	mu     sync.Mutex
	events []idemkit.Event
}

// Observe records ev.
func (r *Recorder) Observe(_ context.Context, ev idemkit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// Count returns how many events of kind k were recorded.
func (r *Recorder) Count(k idemkit.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// Events returns a copy of the events recorded so far, in order.
func (r *Recorder) Events() []idemkit.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]idemkit.Event(nil), r.events...)
}

// RequireReleased fails tb unless key of mode is free for the next claim:
// absent, or holding the record a released claim leaves (which keeps the
// key's fencing token). msg says what the caller checks.
func RequireReleased(tb testing.TB, e *idemkit.Engine, mode idemkit.Mode, key string, msg string, opts ...idemkit.Option) {
	tb.Helper()
	info, err := e.Inspect(context.Background(), mode, key, opts...)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		tb.Fatalf("%s: inspect: %v", msg, err)
	case info.State != idemkit.StateReleased:
		tb.Fatalf("%s: the key is %s, want it released", msg, info.State)
	}
}

// WaitLimit is how long WaitFor waits before it gives up: long enough that
// only a hang reaches it on a loaded machine, so it is no timing assertion.
const WaitLimit = 30 * time.Second

// WaitFor polls cond every millisecond until it holds, and fails tb at once
// ("gave up waiting for what") if that takes longer than WaitLimit. Use it
// to wait for what a real process, server or file brings about; inside a
// testing/synctest bubble, wait for time to pass with time.Sleep instead.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting for %s after %v", what, WaitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}
