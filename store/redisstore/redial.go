package redisstore

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// redialPoll is how often a redialer retries an address that refused its
// last connection, while its caller's context lasts.
const redialPoll = 20 * time.Millisecond

// redialer is the go-redis Dialer of the clients OpenURL makes. It exists
// because of go-redis's dial breaker: once a pool has failed PoolSize
// dials, it stops dialing and fails every call at once, while a
// background probe redials once a second, so a client stays down for up
// to a second after Redis is back (issue 11, item 4; measured by
// TestRecoveryAfterRestart). A redialer makes each dial to an address
// whose last dial failed retry every redialPoll until it connects or its
// context ends: the breaker's probe, whose context lasts the client's
// DialTimeout (5 s by default), then connects within redialPoll of Redis
// coming back instead of at its next one-second tick. A call that dials
// while Redis is down waits for it up to its own deadline (and so
// succeeds if Redis is back in time) instead of failing at once.
type redialer struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	poll time.Duration

	mu   sync.Mutex
	down map[string]bool // addresses whose last dial failed
}

func newRedialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *redialer {
	return &redialer{dial: dial, poll: redialPoll, down: map[string]bool{}}
}

// Dial implements go-redis's Options.Dialer.
func (r *redialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for {
		conn, err := r.dial(ctx, network, addr)
		r.mu.Lock()
		wasDown := r.down[addr]
		if err == nil {
			delete(r.down, addr)
		} else {
			r.down[addr] = true
		}
		r.mu.Unlock()
		if err == nil || !wasDown || ctx.Err() != nil {
			return conn, err
		}
		t := time.NewTimer(r.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// netDialer returns the dial function a redialer wraps: TCP, over TLS when
// conf is not nil, with go-redis's keep-alive settings. It sets no timeout
// of its own: go-redis bounds each dial by DialTimeout through ctx.
func netDialer(conf *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	if conf == nil {
		return nd.DialContext
	}
	td := &tls.Dialer{NetDialer: nd, Config: conf}
	return td.DialContext
}

// Redialer returns a go-redis Dialer (Options.Dialer, ClusterOptions.Dialer
// or FailoverOptions.Dialer) for clients you make yourself, with the
// behaviour the clients of OpenURL have: a Redis that refused the last
// connection is redialled every 20 ms while the caller's context lasts, so
// the client works again within milliseconds of Redis coming back. Without
// it, once a pool has failed PoolSize dials, go-redis (v9.23) probes the
// server only once a second, a period no option changes, and every call
// fails until the probe succeeds. tlsConfig is the client's TLS
// configuration, nil for plain TCP: a Dialer replaces go-redis's own,
// which is what applies TLSConfig. Use one Redialer per client, and none
// for a Sentinel (failover) client: go-redis resolves the master before
// each dial, and a Redialer would keep dialling a dead master's address.
func Redialer(tlsConfig *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return newRedialer(netDialer(tlsConfig)).Dial
}
