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
// A beat that finds the lease lost (the swap is not applied: another
// caller holds the key) ends the heartbeat and reports the loss (see
// lose). For a claim that runs fn (Do, UseToken: cancel is set), so does
// a lease that ends unconfirmed: the lease ends one lease after the last
// confirmation (the sending of the last beat that succeeded, or at first
// the admission), and the first beat arms a timer for that end, so a beat
// that fails or hangs in the store does not delay it. After a failed beat
// the next comes one interval later, or half an interval before the
// lease ends when that is sooner; none is sent later than that.
//
// The zero heartbeat is stopped. All fields but c, cancel and inflight
// are guarded by the scheduler's mutex.
type heartbeat struct {
	s     *beats
	c     *Claim
	ctx   context.Context // the claim's context, detached when a beat runs
	lease time.Duration
	every time.Duration
	// cancel cancels fn's context when the lease is lost; nil for a claim
	// from Begin, which has no context for the work.
	cancel context.CancelCauseFunc

	due       time.Time
	index     int       // position in s.queue; -1 when not queued
	confirmed time.Time // when the lease was last confirmed
	deadline  *time.Timer
	stopped   bool
	lost      bool // the lease was lost, and the loss reported
	inflight  sync.WaitGroup
}

// beats runs the heartbeats of an engine's claims from one timer, armed
// for the earliest beat due. An engine and its views share one.
type beats struct {
	mu    sync.Mutex
	queue []*heartbeat // a binary min-heap on due
	timer *time.Timer
}

// beatEvery returns the interval of c's heartbeat: the configured one,
// or a third of the lease; zero for a claim without a heartbeat
// (WithoutHeartbeat, OnStore).
func (c *Claim) beatEvery() time.Duration {
	every := c.cfg.heartbeat
	if every == 0 {
		every = c.cfg.lease / 3 // a beat must come before the lease ends
	}
	if every <= 0 || c.e.beats == nil {
		return 0
	}
	return every
}

// startHeartbeat queues c's heartbeat: its first beat is due one interval
// from now. cancel, when set, cancels fn's context if the lease is lost.
// A claim without a heartbeat queues nothing.
func (c *Claim) startHeartbeat(ctx context.Context, cancel context.CancelCauseFunc) {
	every := c.beatEvery()
	if every == 0 {
		return
	}
	h := &c.hb
	*h = heartbeat{s: c.e.beats, c: c, ctx: ctx, lease: c.cfg.lease, every: every, cancel: cancel, index: -1}
	h.s.mu.Lock()
	h.confirmed = c.started
	h.due = time.Now().Add(every)
	h.s.push(h)
	h.s.mu.Unlock()
}

// stop ends the heartbeat and waits for a beat, or a report of the lease's
// loss, under way. It reports whether the lease was lost.
func (h *heartbeat) stop() bool {
	if h.s == nil {
		return false
	}
	h.s.mu.Lock()
	h.stopped = true
	if h.index >= 0 {
		h.s.remove(h.index)
	}
	if h.deadline != nil {
		h.deadline.Stop()
	}
	h.s.mu.Unlock()
	h.inflight.Wait()
	return h.isLost()
}

// isLost reports whether the heartbeat found the lease lost.
func (h *heartbeat) isLost() bool {
	if h.s == nil {
		return false
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.lost
}

// beat extends the lease once, then queues the next beat unless the
// heartbeat was stopped or the lease is lost.
func (h *heartbeat) beat() {
	defer h.inflight.Done()
	h.s.mu.Lock()
	if h.deadline == nil && h.cancel != nil {
		h.deadline = time.AfterFunc(time.Until(h.confirmed.Add(h.lease)), h.expire)
	}
	h.s.mu.Unlock()
	sent := time.Now()
	// The beat rewrites the record with a later update time, so that a
	// takeover that read it before this beat landed fails (see fence.go).
	c := h.c
	next := c.rec
	next.updated = max(c.cfg.clock().UnixMilli(), c.rec.updated+1)
	enc := next.encode()
	ok, err := c.swapOwn(detach(h.ctx), c.e.store, enc, h.lease+time.Duration(c.rec.tail)*time.Millisecond)
	switch {
	case ok:
		c.rec.updated, c.enc, c.unsure = next.updated, enc, nil
	case err != nil: // it may have landed
		c.unsure = append(c.unsure, enc)
	}
	h.s.mu.Lock()
	if h.stopped || h.lost {
		h.s.mu.Unlock()
		return
	}
	now := time.Now()
	switch {
	case err == nil && ok:
		h.confirmed = sent
		if h.deadline != nil {
			h.deadline.Reset(sent.Add(h.lease).Sub(now))
		}
		h.due = now.Add(h.every)
	case err == nil: // another caller holds the key
		h.lost = true
		h.s.mu.Unlock()
		h.lose()
		return
	default:
		h.due = now.Add(h.every)
		if h.cancel != nil {
			last := h.confirmed.Add(h.lease - h.every/2)
			if !last.After(now) {
				h.s.mu.Unlock() // no time for another beat: the deadline decides
				return
			}
			if last.Before(h.due) {
				h.due = last
			}
		}
	}
	h.s.push(h)
	h.s.mu.Unlock()
}

// expire runs when the lease ends unless a beat has confirmed it since
// the timer was armed: the lease is lost.
func (h *heartbeat) expire() {
	h.s.mu.Lock()
	if h.stopped || h.lost {
		h.s.mu.Unlock()
		return
	}
	if left := time.Until(h.confirmed.Add(h.lease)); left > 0 {
		h.deadline.Reset(left) // confirmed meanwhile
		h.s.mu.Unlock()
		return
	}
	h.lost = true
	if h.index >= 0 {
		h.s.remove(h.index)
	}
	h.inflight.Add(1) // stop waits for the report
	h.s.mu.Unlock()
	defer h.inflight.Done()
	h.lose()
}

// lose reports a lost lease, once per claim: fn's context is cancelled
// with cause ErrLeaseLost, and EventLeaseLost ends the claim for
// observers. The claim then records nothing (see run and Complete).
func (h *heartbeat) lose() {
	if h.cancel != nil {
		h.cancel(ErrLeaseLost)
	}
	h.c.lost(h.ctx)
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
