package boltstore

import (
	"sync"
	"time"
)

// FakeClock is a settable clock for WithClock, shared by this package's
// internal and external tests. It exists only in test builds.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock set to a fixed whole millisecond.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.UnixMilli(1_700_000_000_000)}
}

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
