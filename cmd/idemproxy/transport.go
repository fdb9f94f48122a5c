package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// errNotResent ends an upstream call the Transport was about to send a
// second time, after the connection that carried the first failed with
// some of the request written.
var errNotResent = errors.New("the upstream connection failed after the request was sent; the request is not sent again")

// newTransport is http.DefaultTransport's setup with a bound on the time
// to the upstream's response headers, whose connections count the bytes
// written on them (sendLog), under onceTransport.
func newTransport(timeout time.Duration) *onceTransport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = timeout
	t.MaxIdleConnsPerHost = 256
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c}, nil
	}
	return &onceTransport{base: t}
}

// onceTransport sends each forwarded request upstream at most once.
//
// net/http's Transport, when a kept-alive connection fails, sends a
// request again on another connection if it never wrote any of it, and
// also, after it was written, if the request is "replayable": a GET, HEAD,
// OPTIONS or TRACE, or any request without a body whose header holds
// Idempotency-Key or X-Idempotency-Key. The proxy forwards the client's
// Idempotency-Key, so a guarded POST without a body would run twice
// upstream behind one claim. onceTransport watches each attempt
// (httptrace.ClientTrace.GotConn and the byte count of its connection):
// when the Transport starts another attempt after one that wrote bytes on
// an HTTP/1 connection, it closes the new connection before anything is
// written on it and ends the call with errNotResent. A resend is still let
// through when nothing of the request had been written, and, for requests
// outside guarded routes, for GET, HEAD, OPTIONS and TRACE, which HTTP
// defines as safe to repeat. What goes on the wire is not changed.
//
// HTTP/2 upstreams: the Transport resends only streams the server refused
// or never processed (REFUSED_STREAM, GOAWAY), and onceTransport leaves
// those alone.
type onceTransport struct{ base *http.Transport }

// RoundTrip implements http.RoundTripper.
func (t *onceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var sl *sendLog
	if st, _ := req.Context().Value(stateKey{}).(*reqState); st != nil && st.send != nil {
		sl = st.send
	} else {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
			// Safe to repeat, off a guarded route: every resend the
			// Transport makes is allowed, so there is nothing to watch.
			return t.base.RoundTrip(req)
		}
		sl = new(sendLog)
	}
	// Cancelled only to stop a resend; otherwise the request's context
	// (which ends when its handler or upstream call does) bounds it.
	ctx, cancel := context.WithCancelCause(req.Context())
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if sl.attempt(info.Conn) {
			return
		}
		if cc := countedConn(info.Conn); cc != nil {
			_ = info.Conn.Close() // nothing written on it yet: the write loop finds it closed
		}
		cancel(errNotResent)
	}}
	res, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err != nil {
		cancel(err)
		if sl.wasRefused() {
			return nil, errNotResent
		}
	}
	return res, err
}

// CloseIdleConnections closes the Transport's idle connections.
func (t *onceTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// sendLog follows one forwarded request's attempts through the Transport:
// whether any of it may have reached the upstream.
type sendLog struct {
	mu       sync.Mutex
	attempts int
	conn     *countingConn // the HTTP/1 connection of the last attempt, or nil
	mark     int64         // conn's written bytes when the attempt got it
	sent     bool          // an earlier attempt, or an HTTP/2 one, may have sent some of it
	refused  bool          // an attempt after a sent one was stopped
}

// attempt records that the Transport got conn for an attempt. It reports
// false, and records the refusal, when the attempt is a resend after an
// attempt that may have been sent.
func (s *sendLog) attempt(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attempts > 0 && s.sentLocked() {
		s.refused = true
		return false
	}
	s.attempts++
	s.sent = s.sentLocked()
	if s.conn = countedConn(conn); s.conn != nil {
		s.mark = s.conn.written.Load()
	} else {
		s.sent = true // HTTP/2: the stream may be written at any time from now
	}
	return true
}

// maybeSent reports whether some of the request may have reached the
// upstream: bytes were written on an HTTP/1 connection after the Transport
// got it for the request, or it went out on an HTTP/2 connection. It is
// false when the request never got a connection (the dial failed or was
// cut off).
func (s *sendLog) maybeSent() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentLocked()
}

func (s *sendLog) sentLocked() bool {
	return s.sent || s.conn != nil && s.conn.written.Load() > s.mark
}

func (s *sendLog) wasRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// countingConn is an upstream connection that counts the bytes written on
// it.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// countedConn returns the countingConn under an HTTP/1 connection the
// Transport handed out, or nil for an HTTP/2 one (shared by many requests)
// or one the proxy did not dial.
func countedConn(c net.Conn) *countingConn {
	if tc, ok := c.(*tls.Conn); ok {
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return nil
		}
		c = tc.NetConn()
	}
	cc, _ := c.(*countingConn)
	return cc
}
