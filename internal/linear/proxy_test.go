package linear

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer accepts connections on a loopback port and echoes every line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through c and waits up to d for its echo.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// TestProxyFaults: the proxy forwards, holds everything while blackholed
// and releases it when healed, delays, and resets open connections.
func TestProxyFaults(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Blackhole()
	if got, err := roundTrip(c, r, 100*time.Millisecond); err == nil {
		t.Fatalf("blackholed: got %q, want a timeout", got)
	}
	p.Heal()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("healed: the held line came back as %q, %v", got, err)
	}

	p.SetDelay(50 * time.Millisecond)
	start := time.Now()
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("delayed both ways by 50ms: round trip took %v", d)
	}
	p.Heal()

	if n := p.Reset(); n != 1 {
		t.Errorf("Reset closed %d connections, want 1", n)
	}
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("after Reset the connection still works")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, bufio.NewReader(c2), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("a new connection after Reset: %q, %v", got, err)
	}
}
