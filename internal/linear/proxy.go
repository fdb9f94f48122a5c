package linear

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP fault proxy on a loopback port: it forwards every
// connection it accepts to a target address, and can delay what it
// forwards, reset every open connection, or hold everything (a blackhole)
// until healed. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[*link]struct{}
	delay  time.Duration
	heal   chan struct{} // non-nil while blackholed; closed by Heal
	closed bool
}

// link is one proxied connection: the client's side and the target's.
type link struct {
	client, upstream net.Conn
	once             sync.Once
	done             chan struct{}
}

func (l *link) close(reset bool) {
	l.once.Do(func() {
		if reset {
			if tc, ok := l.client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with RST, not FIN
			}
		}
		_ = l.client.Close()
		_ = l.upstream.Close()
		close(l.done)
	})
}

// NewProxy starts a proxy on a free loopback port that forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, upstream: up, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close(true)
			return
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pump(l, up, c) })
		p.wg.Go(func() { p.pump(l, c, up) })
	}
}

// pump copies src to dst through the faults until either side closes.
func (p *Proxy) pump(l *link, dst, src net.Conn) {
	defer func() {
		l.close(false)
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.close(true)
			}
			return
		}
	}
}

// gate holds data while the proxy is blackholed and delays it while a
// delay is set; it reports false when the link closed meanwhile.
func (p *Proxy) gate(l *link) bool {
	p.mu.Lock()
	heal, delay := p.heal, p.delay
	p.mu.Unlock()
	if heal != nil {
		select {
		case <-heal:
		case <-l.done:
			return false
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-l.done:
			return false
		}
	}
	return true
}

// SetDelay delays every chunk forwarded from now on by d (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Reset closes every open connection with a TCP reset and returns how
// many there were. New connections are accepted as before.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.close(true)
	}
	return len(ls)
}

// Blackhole holds every byte in both directions, on open and new
// connections, until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	if p.heal == nil {
		p.heal = make(chan struct{})
	}
	p.mu.Unlock()
}

// Heal ends a blackhole and removes the delay.
func (p *Proxy) Heal() {
	p.mu.Lock()
	if p.heal != nil {
		close(p.heal)
		p.heal = nil
	}
	p.delay = 0
	p.mu.Unlock()
}

// Close stops the proxy, closes every connection, and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Heal()
	p.Reset()
	p.wg.Wait()
}
