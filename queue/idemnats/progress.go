package idemnats

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// progress sends InProgress, every interval, for the deliveries it holds
// until each is settled, so the server does not redeliver them while they
// wait or run (WithInProgress).
type progress struct {
	msgs []jetstream.Msg

	mu      sync.Mutex
	settled []bool // by index in msgs
	stop    chan struct{}
	done    sync.WaitGroup
}

// startProgress starts signalling for msgs; a nil *progress (interval 0)
// does nothing.
func startProgress(interval time.Duration, msgs ...jetstream.Msg) *progress {
	if interval <= 0 || len(msgs) == 0 {
		return nil
	}
	p := &progress{msgs: msgs, settled: make([]bool, len(msgs)), stop: make(chan struct{})}
	p.done.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.signal()
			}
		}
	})
	return p
}

func (p *progress) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.msgs {
		if !p.settled[i] {
			_ = m.InProgress() // best effort: a lost signal costs a redelivery, never a second run
		}
	}
}

// settle stops signalling for msgs[i]; it is called before that message
// is acknowledged, so no InProgress follows the ack.
func (p *progress) settle(i int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.settled[i] = true
	p.mu.Unlock()
}

// end stops signalling and waits for the signaller to exit.
func (p *progress) end() {
	if p == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
}
