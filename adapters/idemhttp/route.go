package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store"
)

// transport is the first part of every key this package gives the engine,
// so no other adapter's keys can meet them.
const transport = "http"

// mode is the middleware a route serves.
type mode uint8

const (
	modeKey mode = iota
	modeWindow
	modeToken
	modeIssuer
)

// String names the constructor of the mode, for configuration errors.
func (m mode) String() string {
	return [...]string{modeKey: "Idempotency", modeWindow: "Window", modeToken: "Token", modeIssuer: "TokenIssuer"}[m]
}

// route is what every mode shares, built once per constructor call: the
// engine view with the route's options applied, the settings, the
// fingerprinter and the problem writer.
type route struct {
	e       *idemkit.Engine
	payload *idemkit.Engine // the payload guard's view (WithPayloadWindow), or nil
	c       *config
	fp      *keying.Fingerprinter
	p       problems
	// fpDefault is set when the body's fingerprint is the mode's
	// default: no WithFingerprinter, WithVolatile or WithInclude.
	fpDefault bool
}

func newRoute(e *idemkit.Engine, opts []Option, m mode) (*route, error) {
	if e == nil {
		return nil, fmt.Errorf("idemhttp: %w: nil engine", idemkit.ErrInvalid)
	}
	c, err := newConfig(m, opts)
	if err != nil {
		return nil, err
	}
	view, err := e.With(c.engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemhttp: WithEngineOptions: %w", err)
	}
	rt := &route{e: view, c: c, fp: c.fp, p: newProblems(c)}
	if c.payloadWindow > 0 {
		if rt.payload, err = view.With(idemkit.WithRetention(c.payloadWindow)); err != nil {
			return nil, fmt.Errorf("idemhttp: payload window: %w", err)
		}
	}
	if rt.fp == nil {
		rt.fpDefault = len(c.volatile) == 0 && len(c.include) == 0
		if rt.fp, err = defaultFingerprinter(m, c.volatile, c.include); err != nil {
			return nil, fmt.Errorf("idemhttp: %w: WithVolatile or WithInclude: %w", idemkit.ErrInvalid, err)
		}
	}
	return rt, nil
}

// defaultFingerprinter is the mode's fingerprinter: Idempotency and Token
// modes compare whole payloads but the paths named; Window mode drops
// keying.WindowVolatile as well.
func defaultFingerprinter(m mode, volatile, include []string) (*keying.Fingerprinter, error) {
	opts := []keying.Option{keying.WithVolatile(volatile...)}
	if len(include) > 0 {
		opts = append(opts, keying.WithInclude(include...))
	}
	if m == modeWindow {
		opts = append(opts, keying.WithVolatile(keying.WindowVolatile()...))
	}
	return keying.NewFingerprinter(opts...)
}

// enter passes requests of methods the route does not guard straight to
// next, and identifies the caller of the others, answering 401 itself. It
// reports whether the request is the middleware's to handle.
func (rt *route) enter(w http.ResponseWriter, r *http.Request, next http.Handler) (string, bool) {
	if !rt.c.guarded(r.Method) {
		next.ServeHTTP(w, r)
		return "", false
	}
	return rt.principal(w, r)
}

// principal identifies the caller, or answers 401.
func (rt *route) principal(w http.ResponseWriter, r *http.Request) (string, bool) {
	p, err := rt.c.principal(r)
	if err != nil || p == "" {
		rt.p.write(w, r, answer{kind: httpcore.KindUnauthenticated, detail: "the caller of this request could not be identified"})
		return "", false
	}
	return p, true
}

var errBodyTooLarge = errors.New("idemhttp: request body too large")

// body reads the request body, at most the configured cap, for the
// fingerprint. It answers 413 or 400 itself and reports false. The body is
// given back to the handler only if it runs (reqBody.restore); a request
// answered without it (a replay, say) returns the buffer with release.
func (rt *route) body(w http.ResponseWriter, r *http.Request) (reqBody, bool) {
	rb, err := readBody(r, rt.c.maxBody)
	if err == nil {
		return rb, true
	}
	var tooLarge *http.MaxBytesError // a server-wide http.MaxBytesReader
	switch {
	case errors.Is(err, errBodyTooLarge), errors.As(err, &tooLarge):
		limit := rt.c.maxBody
		if tooLarge != nil {
			limit = min(limit, tooLarge.Limit)
		}
		rt.p.write(w, r, answer{kind: httpcore.KindBodyTooLarge, detail: fmt.Sprintf("the request body is over %d bytes", limit)})
	default:
		rt.p.write(w, r, answer{kind: httpcore.KindBodyUnreadable, detail: "the request body could not be read"})
	}
	return reqBody{}, false
}

// reqBody is a request body read for the fingerprint.
type reqBody struct {
	b      []byte
	pooled *[pooledBodyLen]byte // the pooled array b lies in, or nil
	sent   bool                 // the request had a body to restore
}

// pooledBodyLen is the size of the pooled buffers small bodies are read
// into, so that a replay, which never hands the body to the handler,
// allocates none.
const pooledBodyLen = 4 << 10

var bodyPool = sync.Pool{New: func() any { return new([pooledBodyLen]byte) }}

// restore gives the body back to r for the handler, in br. A body in a
// pooled buffer is copied out first and the buffer released: pooled memory
// never reaches the handler, which is called only when it is to run, so a
// replay never pays for the copy.
func (rb *reqBody) restore(r *http.Request, br *bodyReader) {
	if rb.pooled != nil {
		b := bytes.Clone(rb.b)
		rb.release()
		rb.b = b
	}
	if rb.sent {
		br.Reset(rb.b)
		r.Body = br
	}
}

// release returns a pooled buffer to the pool; rb.b must not be used
// afterwards. It is a no-op for a body that was restored.
func (rb *reqBody) release() {
	if rb.pooled != nil {
		bodyPool.Put(rb.pooled)
	}
	rb.pooled, rb.b = nil, nil
}

// bodyReader is the restored request body.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// firstRead is the most readBody allocates before any byte has arrived.
const firstRead = 64 << 10

// readBody reads r's body, at most limit bytes, and closes a body it read
// to the end: net/http's server would otherwise read a body left open
// once more, after the response, for what the handler left unread.
func readBody(r *http.Request, limit int64) (reqBody, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return reqBody{}, nil
	}
	if r.ContentLength > limit {
		return reqBody{}, errBodyTooLarge
	}
	rb := reqBody{sent: true}
	if r.ContentLength < pooledBodyLen { // unknown (-1) or small
		rb.pooled = bodyPool.Get().(*[pooledBodyLen]byte)
		rb.b = rb.pooled[:0]
	} else {
		// +1 so that EOF is seen without growing. The length is only
		// the client's word: beyond firstRead the buffer grows as bytes
		// arrive, so a few header bytes cannot pin the whole cap.
		rb.b = make([]byte, 0, min(r.ContentLength+1, firstRead))
	}
	buf := rb.b
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
			rb.release() // buf has left the pooled array, if it was in one
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > limit:
			err = errBodyTooLarge
		case err == io.EOF:
			rb.b = buf
			_ = r.Body.Close()
			return rb, nil
		}
		if err != nil {
			rb.release()
			return reqBody{}, err
		}
	}
}

// scope is the per-call engine option that makes the principal own the
// key: the engine keeps it in store keys only as a digest.
func scope(principal string) idemkit.Option { return idemkit.WithScope(principal) }

// appendOperation appends to b what the request does: its method, the
// ServeMux pattern that matched it (r.Pattern) and its path, so the same
// body sent to /orders/1 and /orders/2 are different operations. Callers
// pass httpcore.Transient(appendOperation(buf[:0], r)), buf a stack array, straight
// to the fingerprinter, which keeps no reference to it.
//
// A pattern that names the request's method ("POST /orders") is not
// preceded by the method again: it says the same, and the fingerprint's
// input stays a block shorter for a small request.
func appendOperation(b []byte, r *http.Request) []byte {
	if !hasMethod(r.Pattern, r.Method) {
		b = append(b, r.Method...)
		b = append(b, ' ')
	}
	b = append(b, r.Pattern...)
	b = append(b, ' ')
	return appendEscapedPath(b, r.URL)
}

// appendEscapedPath appends u.EscapedPath() to b. A path without a RawPath
// whose bytes all stay as they are when escaped, as most do, is its own
// escaped form: it is appended after a table lookup per byte instead of
// net/url's own pass over it.
func appendEscapedPath(b []byte, u *url.URL) []byte {
	if u.RawPath == "" {
		p := u.Path
		i := 0
		for i < len(p) && plainPathByte[p[i]] {
			i++
		}
		if i == len(p) {
			return append(b, p...)
		}
	}
	return append(b, u.EscapedPath()...)
}

// plainPathByte holds, for every byte, whether net/url leaves it as it is
// in an escaped path, as net/url itself answers: it escapes each byte of
// a path on its own.
var plainPathByte = func() (plain [256]bool) {
	for c := range plain {
		u := url.URL{Path: "/" + string([]byte{byte(c)})}
		plain[c] = u.EscapedPath() == u.Path
	}
	return plain
}()

// hasMethod reports whether pattern starts with method and a space.
func hasMethod(pattern, method string) bool {
	return len(pattern) > len(method) && pattern[len(method)] == ' ' && pattern[:len(method)] == method
}

// params returns the query parameters that are part of the fingerprint:
// the selected ones, or all of them when all is set and none were selected.
func (rt *route) params(r *http.Request, all bool) url.Values {
	return httpcore.QueryParams(r, rt.c.query, rt.c.querySet, all)
}

// finish answers a request that went through Do or UseToken: the fresh
// response when the handler ran (rec is not nil), the stored one on a
// replay, or the problem mapErr picks for err. key is the client's idempotency key, ""
// in Token mode.
func (rt *route) finish(w http.ResponseWriter, r *http.Request, rec *recorder, res idemkit.Result, err error, key string,
	mapErr func(error) (answer, bool)) {
	if rec != nil && rec.panicked != nil {
		// The handler marked the outcome unknown and then panicked; the
		// terminal record is stored, the panic goes on.
		panic(rec.panicked)
	}
	if rec != nil && rec.txResponse != nil {
		rt.afterTx(w, r, rec, res, err, key)
		return
	}
	if rec != nil {
		rt.afterRun(r, rec, err)
		if rec.state == capturing {
			rec.writeFresh(r.Method)
		}
		return
	}
	if err == nil && res.Replayed {
		rt.replay(w, r, res.Value, key)
		return
	}
	if a, ok := mapErr(err); ok {
		a.key = key
		rt.p.write(w, r, a)
		return
	}
	rt.internal(w, r, err, key)
}

// replay answers with a stored outcome.
func (rt *route) replay(w http.ResponseWriter, r *http.Request, value []byte, key string) {
	if kind, why, ok := httpcore.Terminal(value); ok {
		rt.p.write(w, r, answer{kind: kind, detail: why, key: key, replay: true})
		return
	}
	if err := sendResponse(w, value, r.Method, rt.c.replayHeader, true); err != nil {
		rt.internal(w, r, err, key)
	}
}

// afterRun logs what went wrong around a handler that ran.
func (rt *route) afterRun(r *http.Request, rec *recorder, err error) {
	ctx := r.Context()
	switch {
	case rec.tooBig:
		rt.warn(ctx, "idemhttp: response over the stored-size cap sent unguarded and not stored", r,
			slog.Int("max_stored", rt.c.maxStored), slog.Bool("key_released", rt.c.tooLarge == ReleaseKey))
	case errors.Is(err, idemkit.ErrResultTooLarge):
		rt.warn(ctx, "idemhttp: encoded response over the engine's result cap (idemkit.WithMaxResultSize); not stored", r)
	case err != nil && !errors.Is(err, errNotStored) && !errors.Is(err, errPassedThrough):
		rt.warn(ctx, "idemhttp: handler ran but its response could not be recorded", r, slog.String("error", describe(err)))
	case rec.unknown:
		rt.warn(ctx, "idemhttp: handler could not learn the outcome of its work; the key keeps an outcome-unknown record", r)
	}
}

func (rt *route) warn(ctx context.Context, msg string, r *http.Request, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("method", r.Method), slog.String("pattern", r.Pattern))
	rt.c.log().LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// common maps the errors every mode shares; it reports whether it did.
func common(err error) (answer, bool) {
	var ce *idemkit.ConflictError
	switch {
	case errors.As(err, &ce) && errors.Is(err, idemkit.ErrInProgress):
		return answer{kind: httpcore.KindInProgress, retry: ce.RetryAfter,
			detail: "a request with this key is still being processed; retry after the delay given"}, true
	case errors.Is(err, idemkit.ErrResultTooLarge):
		// The engine's terminal record of a response over its result cap
		// (idemkit.WithOversized): the handler ran and does not run again.
		_, why, _ := httpcore.Terminal(httpcore.TerminalRecord(httpcore.ReasonTooLarge))
		return answer{kind: httpcore.KindResponseNotStored, detail: why, replay: true}, true
	case errors.Is(err, idemkit.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return answer{kind: httpcore.KindUnavailable, retry: httpcore.UnavailableRetry,
			detail: "duplicate protection is unavailable; the request was not processed"}, true
	}
	return answer{}, false
}

// internal answers 500 for an outcome no mode expects and logs it, without
// the error's text (stores name keys in their errors): the log line and
// the answer share the problem instance, so one can be found from the
// other.
func (rt *route) internal(w http.ResponseWriter, r *http.Request, err error, key string) {
	a := answer{kind: httpcore.KindInternal, detail: "the request could not be processed", key: key}
	if rt.p.members&MemberInstance != 0 {
		a.instance = rt.p.instance(r)
	}
	rt.c.log().LogAttrs(r.Context(), slog.LevelError, "idemhttp: unexpected engine outcome",
		slog.String("error", describe(err)), slog.String("method", r.Method), slog.String("pattern", r.Pattern),
		slog.String("instance", a.instance))
	rt.p.write(w, r, a)
}

// describe names the kind of err in fixed words: error texts can hold
// store keys, and with them raw keys, tokens and principals, so they never
// reach a log line or a client.
func describe(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, context.Canceled):
		return "request cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, idemkit.ErrUnavailable):
		return "store unavailable"
	case errors.Is(err, store.ErrCorrupt):
		return "corrupt record in the store"
	case errors.Is(err, errCorruptResponse):
		return "corrupt stored response"
	case errors.Is(err, idemkit.ErrLeaseLost):
		return "lease lost"
	case errors.Is(err, idemkit.ErrResultTooLarge):
		return "result over the engine's size cap"
	case errors.Is(err, idemkit.ErrInvalid):
		return "invalid argument"
	}
	return "unexpected error"
}
