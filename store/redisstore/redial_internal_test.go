package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
)

// fakeDial fails its first fails calls, then connects, counting calls.
type fakeDial struct {
	mu    sync.Mutex
	fails int
	calls int
}

var errDialRefused = errors.New("connection refused")

func (f *fakeDial) dial(context.Context, string, string) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fails > 0 {
		f.fails--
		return nil, errDialRefused
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func TestRedialerFailsOnceThenWaitsForTheAddress(t *testing.T) {
	f := &fakeDial{fails: 5}
	r := newRedialer(f.dial)
	r.poll = 0
	ctx := context.Background()

	// Up until now: the first failure is returned at once, as go-redis's
	// own dialer would.
	if _, err := r.Dial(ctx, "tcp", "a:1"); !errors.Is(err, errDialRefused) || f.calls != 1 {
		t.Fatalf("first dial: %v after %d calls", err, f.calls)
	}
	// Down: the next dial (go-redis's breaker probe) retries until Redis
	// answers, instead of failing and sleeping a second.
	conn, err := r.Dial(ctx, "tcp", "a:1")
	if err != nil || f.calls != 6 {
		t.Fatalf("dial while down: %v after %d calls, want a connection after 6", err, f.calls)
	}
	conn.Close()
	// Up again: a failure is returned at once.
	f.fails = 1
	if _, err := r.Dial(ctx, "tcp", "a:1"); !errors.Is(err, errDialRefused) || f.calls != 7 {
		t.Fatalf("dial after recovery: %v after %d calls", err, f.calls)
	}
	// Another address is not down.
	f.fails = 1
	if _, err := r.Dial(ctx, "tcp", "b:1"); !errors.Is(err, errDialRefused) || f.calls != 8 {
		t.Fatalf("dial of another address: %v after %d calls", err, f.calls)
	}
}

func TestRedialerStopsWithItsContext(t *testing.T) {
	f := &fakeDial{fails: 1 << 30}
	r := newRedialer(f.dial)
	r.poll = 0
	if _, err := r.Dial(context.Background(), "tcp", "a:1"); err == nil {
		t.Fatal("dial succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Dial(ctx, "tcp", "a:1"); !errors.Is(err, errDialRefused) || f.calls != 2 {
		t.Fatalf("dial with a done context while down: %v after %d calls, want the dial error after 2", err, f.calls)
	}
}
