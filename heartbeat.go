package idemkit

import (
	"context"
	"sync"
	"time"
)

// heartbeat extends a running claim's lease until stopped or lost. It is
// lazy: starting one only queues it on the engine's beat scheduler, and
// nothing runs (no timer, goroutine or store call of its own) until the
// claim has been held for one beat interval, a fraction of the lease; the
// work of most claims ends long before. stop waits for a beat already
// under way, so no store call outlives the claim that started it.
//
// The zero heartbeat is stopped. All fields but inflight are guarded by
// the scheduler's mutex.
type heartbeat struct {
	s     *beats
	e     *Engine
	ctx   context.Context // the claim's context, detached when a beat runs
	sk    string
	enc   []byte
	lease time.Duration
	every time.Duration

	due      time.Time
	index    int // position in s.queue; -1 when not queued
	stopped  bool
	inflight sync.WaitGroup
}

// beats runs the heartbeats of an engine's claims from one timer, armed
// for the earliest beat due. An engine and its views share one.
type beats struct {
	mu    sync.Mutex
	queue []*heartbeat // a binary min-heap on due
	timer *time.Timer
}

// start queues c's heartbeat: its first beat is due one interval from now
// (the configured interval, or a third of the lease). A claim without a
// heartbeat (WithoutHeartbeat, OnStore) queues nothing.
func (c *Claim) startHeartbeat(ctx context.Context) {
	cfg := c.cfg
	every := cfg.heartbeat
	if every == 0 {
		every = cfg.lease / 3 // a beat must come before the lease ends
	}
	if every <= 0 || c.e.beats == nil {
		return
	}
	h := &c.hb
	*h = heartbeat{s: c.e.beats, e: c.e, ctx: ctx, sk: c.sk, enc: c.enc, lease: cfg.lease, every: every, index: -1}
	h.s.mu.Lock()
	h.due = time.Now().Add(every)
	h.s.push(h)
	h.s.mu.Unlock()
}

// stop ends the heartbeat and waits for a beat under way.
func (h *heartbeat) stop() {
	if h.s == nil {
		return
	}
	h.s.mu.Lock()
	h.stopped = true
	if h.index >= 0 {
		h.s.remove(h.index)
	}
	h.s.mu.Unlock()
	h.inflight.Wait()
}

// beat extends the lease once, then queues the next beat unless the
// heartbeat was stopped or the lease is lost (complete reports that).
func (h *heartbeat) beat() {
	defer h.inflight.Done()
	ok, err := h.e.store.CompareAndSwap(detach(h.ctx), h.sk, h.enc, h.enc, h.lease)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.stopped || (err == nil && !ok) {
		return
	}
	h.due = time.Now().Add(h.every)
	h.s.push(h)
}

// fire starts every beat that is due, each in its own goroutine so a slow
// store call delays no other claim, and re-arms the timer for the next.
func (s *beats) fire() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 && !s.queue[0].due.After(now) {
		h := s.queue[0]
		s.remove(0)
		h.inflight.Add(1)
		go h.beat()
	}
	if len(s.queue) > 0 {
		s.timer.Reset(time.Until(s.queue[0].due))
	}
}

// push adds h to the queue and re-arms the timer when h is now the first
// beat due. s.mu is held.
func (s *beats) push(h *heartbeat) {
	h.index = len(s.queue)
	s.queue = append(s.queue, h)
	s.up(h.index)
	if h.index != 0 {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(h.due), s.fire)
		return
	}
	s.timer.Reset(time.Until(h.due))
}

// remove takes the heartbeat at position i out of the queue. The timer
// stays armed: a fire with nothing due only re-arms it. s.mu is held.
func (s *beats) remove(i int) {
	last := len(s.queue) - 1
	h := s.queue[i]
	s.swap(i, last)
	s.queue[last] = nil
	s.queue = s.queue[:last]
	h.index = -1
	if i < last {
		s.down(i)
		s.up(i)
	}
}

func (s *beats) less(i, j int) bool { return s.queue[i].due.Before(s.queue[j].due) }

func (s *beats) swap(i, j int) {
	s.queue[i], s.queue[j] = s.queue[j], s.queue[i]
	s.queue[i].index, s.queue[j].index = i, j
}

func (s *beats) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			return
		}
		s.swap(i, parent)
		i = parent
	}
}

func (s *beats) down(i int) {
	n := len(s.queue)
	for {
		smallest, l, r := i, 2*i+1, 2*i+2
		if l < n && s.less(l, smallest) {
			smallest = l
		}
		if r < n && s.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			return
		}
		s.swap(i, smallest)
		i = smallest
	}
}
