package fake

import (
	"context"
	"sync"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// EventLog is an idemkit.Observer that keeps every event.
type EventLog struct {
	mu     sync.Mutex
	events []idemkit.Event
}

// Observe keeps ev.
func (l *EventLog) Observe(_ context.Context, ev idemkit.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

// Of returns the events of kind.
func (l *EventLog) Of(kind idemkit.EventKind) []idemkit.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []idemkit.Event
	for _, ev := range l.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// NewEngine returns an engine over s that logs its events, or fails t.
func NewEngine(t *testing.T, s store.Store, opts ...idemkit.Option) (*idemkit.Engine, *EventLog) {
	log := &EventLog{}
	e, err := idemkit.New(s, append([]idemkit.Option{idemkit.WithObserver(log)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e, log
}
