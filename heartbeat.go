package idemkit

import (
	"context"
	"sync"
	"time"
)

// heartbeat extends a running claim's lease until stopped or lost. stop
// waits for a beat already under way, so no store call outlives the Do
// that started it.
type heartbeat struct {
	mu       sync.Mutex
	timer    *time.Timer
	stopped  bool
	inflight sync.WaitGroup
}

func (e *Engine) startHeartbeat(ctx context.Context, cfg *config, sk string, enc []byte) *heartbeat {
	every := cfg.heartbeat
	if every == 0 || every >= cfg.lease {
		every = cfg.lease / 3 // a beat must come before the lease ends
	}
	if every <= 0 {
		return nil
	}
	h := &heartbeat{}
	bg := detach(ctx)
	lease := cfg.lease
	beat := func() {
		if !h.begin() {
			return
		}
		defer h.inflight.Done()
		ok, err := e.store.CompareAndSwap(bg, sk, enc, enc, lease)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped || (err == nil && !ok) {
			return // done, or the lease is lost: complete reports it
		}
		h.timer.Reset(every)
	}
	h.mu.Lock()
	h.timer = time.AfterFunc(every, beat)
	h.mu.Unlock()
	return h
}

// begin registers a beat unless the heartbeat was stopped.
func (h *heartbeat) begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.inflight.Add(1)
	return true
}

func (h *heartbeat) stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
	h.inflight.Wait()
}
