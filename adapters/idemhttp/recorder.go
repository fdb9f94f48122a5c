package idemhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// recorder captures a handler's response (status, headers, body) so that
// it can be stored before it is sent. Headers go straight into the real
// writer's header map: whenever the handler ran, its response is the one
// the client gets. As in net/http, the headers are those of the moment the
// status was set (WriteHeader or the first Write): later changes to the
// map are undone before the response is stored or sent.
//
// A handler that flushes or hijacks, or writes more than the stored-size
// cap, switches the recorder to pass-through: what was captured is sent,
// later writes go directly to the client, and the response is not stored.
type recorder struct {
	w      http.ResponseWriter
	c      *config
	status int
	header http.Header // the header map when the status was set
	body   []byte
	state  recState
	tooBig bool       // the response was over the stored-size cap
	in     bodyReader // the request body restored for the handler

	txResponse []byte // the response CompleteIn recorded in the handler's transaction

	unknown  bool // the handler called OutcomeUnknown
	panicked any  // what the handler panicked with after OutcomeUnknown
}

type recState uint8

const (
	capturing  recState = iota
	streaming           // Flush was called
	overflowed          // the body went over the cap
	hijacked            // Hijack succeeded
)

// Errors that fn returns to the engine so that it releases the key (or
// spends the token) instead of storing a response.
var (
	errNotStored     = errors.New("idemhttp: response status not stored by policy")
	errPassedThrough = errors.New("idemhttp: response streamed, hijacked or too large; not stored")
)

func newRecorder(w http.ResponseWriter, c *config) *recorder {
	return &recorder{w: w, c: c}
}

// Header returns the real writer's header map.
func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader records the status. Informational statuses other than 101
// are sent at once, as net/http does.
func (rec *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	switch {
	case rec.state == hijacked:
		return
	case rec.state != capturing:
		rec.w.WriteHeader(code)
	case code >= 100 && code < 200 && code != http.StatusSwitchingProtocols:
		if rec.status == 0 { // after the final status it is superfluous
			rec.w.WriteHeader(code)
		}
	case rec.status == 0:
		rec.setStatus(code)
	}
}

// setStatus records the final status and, as net/http does, the headers
// of that moment.
func (rec *recorder) setStatus(code int) {
	rec.status = code
	rec.header = rec.w.Header().Clone()
}

// restoreHeader undoes header changes made after the status was set.
func (rec *recorder) restoreHeader() {
	if rec.header == nil {
		return
	}
	h := rec.w.Header()
	clear(h)
	maps.Copy(h, rec.header)
	rec.header = nil
}

// Write captures p, or passes it through once the recorder has switched.
func (rec *recorder) Write(p []byte) (int, error) {
	if rec.state == capturing && len(rec.body)+len(p) > rec.c.maxStored {
		rec.passThrough(overflowed)
	}
	switch rec.state {
	case capturing:
		if rec.status == 0 {
			rec.setStatus(http.StatusOK)
		}
		rec.body = append(rec.body, p...)
		return len(p), nil
	case hijacked:
		return 0, http.ErrHijacked
	}
	return rec.w.Write(p)
}

// WriteString is Write for strings, without a conversion.
func (rec *recorder) WriteString(s string) (int, error) {
	if rec.state == capturing && len(rec.body)+len(s) <= rec.c.maxStored {
		if rec.status == 0 {
			rec.setStatus(http.StatusOK)
		}
		rec.body = append(rec.body, s...)
		return len(s), nil
	}
	return rec.Write([]byte(s))
}

// FlushError switches to pass-through (the response is streamed, so it is
// not stored) and flushes the real writer.
func (rec *recorder) FlushError() error {
	if rec.state == hijacked {
		return http.ErrHijacked
	}
	if rec.state == capturing {
		rec.passThrough(streaming)
	}
	return http.NewResponseController(rec.w).Flush()
}

// Flush implements http.Flusher; see FlushError.
func (rec *recorder) Flush() { _ = rec.FlushError() }

// Hijack hands the connection to the handler; the response is then not
// stored. What the handler wrote before is sent first, as net/http does
// (a 101 Switching Protocols, say).
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if rec.state == hijacked {
		return nil, nil, http.ErrHijacked
	}
	if rec.state == capturing && rec.status != 0 && canHijack(rec.w) {
		rec.passThrough(streaming)
	}
	conn, brw, err := http.NewResponseController(rec.w).Hijack()
	if err == nil {
		rec.state = hijacked
	}
	return conn, brw, err
}

// canHijack reports whether w, or a writer it wraps, is an http.Hijacker,
// as http.ResponseController looks for one (HTTP/2 writers are not).
func canHijack(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(http.Hijacker); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// Unwrap returns the real writer, for http.ResponseController.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// passThrough sends what was captured and makes later writes direct.
func (rec *recorder) passThrough(st recState) {
	rec.state = st
	rec.restoreHeader()
	rec.w.Header().Del(rec.c.replayHeader)
	if rec.status != 0 {
		rec.w.WriteHeader(rec.status)
	}
	if len(rec.body) > 0 {
		_, _ = rec.w.Write(rec.body)
	}
	rec.body = nil
}

// serve is the engine work function, allocated with the recorder only
// when the handler is to run: it gives the handler the request body rb,
// runs next, then encodes the captured response for the store, or a
// terminal record when it cannot be stored (WithUnstored), or returns an
// error so that the engine releases the key.
func (rec *recorder) serve(ctx context.Context, next http.Handler, r *http.Request, rb *reqBody) (enc []byte, err error) {
	rb.restore(r, &rec.in)
	defer func() {
		// A handler that marked the outcome unknown may then abort
		// (http.ErrAbortHandler, to cut off a response it had begun to
		// send): the key still keeps its terminal record, and finish
		// panics again once it is stored.
		if rec.unknown {
			if v := recover(); v != nil {
				rec.panicked = v
				enc, err = httpcore.TerminalRecord(httpcore.ReasonOutcomeUnknown), nil
			}
		}
	}()
	next.ServeHTTP(rec, withRecorder(r, ctx, rec))
	if rec.unknown {
		return httpcore.TerminalRecord(httpcore.ReasonOutcomeUnknown), nil
	}
	if rec.txResponse != nil {
		return nil, nil // the engine settles by the transaction's outcome
	}
	c := rec.c
	switch {
	case rec.state == capturing:
	case c.callback && rec.status >= 200 && rec.status < 300:
		// A handled callback is answered 2xx on every retry, even when
		// its body could not be kept: its status and headers are stored.
		// A Content-Encoding would describe the body that is not kept.
		rec.tooBig = rec.state == overflowed
		allow := slices.DeleteFunc(slices.Clone(c.replayHeaders), func(n string) bool { return n == "Content-Encoding" })
		return encodeResponse(rec.status, rec.header, allow, nil), nil
	case rec.state == overflowed:
		rec.tooBig = true
		return unstored(c.tooLarge, httpcore.ReasonTooLarge)
	default:
		return unstored(c.streamed, httpcore.ReasonStreamed)
	}
	rec.complete()
	if !c.store(rec.status) {
		return nil, errNotStored
	}
	enc = encodeResponse(rec.status, rec.w.Header(), c.replayHeaders, rec.body)
	if len(enc) > c.maxStored {
		// The headers took it over the cap; the response itself is
		// still to be sent (writeFresh).
		rec.tooBig = true
		return unstored(c.tooLarge, httpcore.ReasonTooLarge)
	}
	return enc, nil
}

// unstored is the outcome of a response that cannot be stored.
func unstored(u Unstored, reason httpcore.Reason) ([]byte, error) {
	if u == ReleaseKey {
		return nil, errPassedThrough
	}
	return httpcore.TerminalRecord(reason), nil
}

// complete settles the captured response as net/http would have sent it:
// default status, sniffed Content-Type, no body where none is allowed.
func (rec *recorder) complete() {
	rec.restoreHeader()
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	rec.body = settleBody(rec.status, rec.w.Header(), rec.body)
}

// settleBody returns the body net/http would send with status and h: none
// where the status allows none; otherwise body, with a sniffed
// Content-Type added to h when it has none (and no Content-Encoding).
func settleBody(status int, h http.Header, body []byte) []byte {
	if !bodyAllowed(status) {
		return nil
	}
	if _, typed := h["Content-Type"]; !typed && len(body) > 0 && h.Get("Content-Encoding") == "" {
		h["Content-Type"] = []string{http.DetectContentType(body)}
	}
	return body
}

// writeFresh sends the captured response to the client, in answer to a
// request of method, with the Content-Length a replay of it has
// (setContentLength).
func (rec *recorder) writeFresh(method string) {
	h := rec.w.Header()
	delete(h, rec.c.replayHeader)
	setContentLength(h, method, rec.status, len(rec.body), false)
	rec.w.WriteHeader(rec.status)
	if len(rec.body) > 0 {
		_, _ = rec.w.Write(rec.body)
	}
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// statusWriter passes a response through and remembers its status, for
// Window mode.
type statusWriter struct {
	http.ResponseWriter
	status  int
	in      bodyReader // the request body restored for the handler
	unknown bool       // the handler called OutcomeUnknown
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 && (code < 100 || code >= 200 || code == http.StatusSwitchingProtocols) {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.ResponseWriter.Write(p)
}

func (sw *statusWriter) WriteString(s string) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	if ws, ok := sw.ResponseWriter.(interface{ WriteString(string) (int, error) }); ok {
		return ws.WriteString(s)
	}
	return sw.ResponseWriter.Write([]byte(s))
}

// FlushError flushes the real writer.
func (sw *statusWriter) FlushError() error {
	return http.NewResponseController(sw.ResponseWriter).Flush()
}

// Flush implements http.Flusher.
func (sw *statusWriter) Flush() { _ = sw.FlushError() }

// Hijack hands the connection to the handler.
func (sw *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(sw.ResponseWriter).Hijack()
}

// Unwrap returns the real writer, for http.ResponseController.
func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// result returns the status for the store policy; a handler that wrote
// nothing sent 200.
func (sw *statusWriter) result() int {
	if sw.status == 0 {
		return http.StatusOK
	}
	return sw.status
}
