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

	"github.com/idemkit/idemkit"
)

// route is what every mode shares: the engine and the route's settings.
type route struct {
	e *idemkit.Engine
	c *config
}

func newRoute(e *idemkit.Engine, opts []Option) (route, error) {
	if e == nil {
		return route{}, fmt.Errorf("idemhttp: %w: nil engine", idemkit.ErrInvalid)
	}
	c, err := newConfig(opts)
	if err != nil {
		return route{}, err
	}
	if err := idemkit.CheckOptions(c.callOpts...); err != nil {
		return route{}, fmt.Errorf("idemhttp: engine options: %w", err)
	}
	return route{e: e, c: c}, nil
}

// enter passes requests of methods the route does not guard straight to
// next, and identifies the caller of the others, answering 401 itself. It
// reports whether the request is the middleware's to handle.
func (rt route) enter(w http.ResponseWriter, r *http.Request, next http.Handler) (string, bool) {
	if !rt.c.guarded(r.Method) {
		next.ServeHTTP(w, r)
		return "", false
	}
	return rt.principal(w, r)
}

// principal identifies the caller, or answers 401.
func (rt route) principal(w http.ResponseWriter, r *http.Request) (string, bool) {
	p, err := rt.c.principal(r)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, ProblemUnauthenticated, "the caller of this request could not be identified", 0)
		return "", false
	}
	return p, true
}

var errBodyTooLarge = errors.New("idemhttp: request body too large")

// body reads the request body, at most the configured cap, and restores it
// for the handler. It answers 413 or 400 itself and reports false.
func (rt route) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := readBody(r, rt.c.maxBody)
	var tooLarge *http.MaxBytesError // a server-wide http.MaxBytesReader
	switch {
	case errors.Is(err, errBodyTooLarge), errors.As(err, &tooLarge):
		limit := rt.c.maxBody
		if tooLarge != nil {
			limit = min(limit, tooLarge.Limit)
		}
		writeProblem(w, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge,
			fmt.Sprintf("the request body is over %d bytes", limit), 0)
		return nil, false
	case err != nil:
		writeProblem(w, http.StatusBadRequest, ProblemBodyUnreadable, "the request body could not be read", 0)
		return nil, false
	}
	if r.Body != nil && r.Body != http.NoBody {
		br := new(bodyReader)
		br.Reset(b)
		r.Body = br
	}
	return b, true
}

// bodyReader is the restored request body.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// firstRead is the most readBody allocates before any byte has arrived.
const firstRead = 64 << 10

func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	size := int64(512)
	if r.ContentLength >= 0 {
		// +1 so that EOF is seen without growing. The length is only
		// the client's word: beyond firstRead the buffer grows as bytes
		// arrive, so a few header bytes cannot pin the whole cap.
		size = min(r.ContentLength+1, firstRead)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// operation names what the request does: its method, the ServeMux pattern
// that matched it (r.Pattern) and its path, so the same body sent to
// /orders/1 and /orders/2 are different operations.
func operation(r *http.Request) string {
	return r.Method + " " + r.Pattern + " " + r.URL.EscapedPath()
}

// params returns the query parameters that are part of the fingerprint:
// the selected ones, or all of them when all is set and none were selected.
func (rt route) params(r *http.Request, all bool) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	if !rt.c.querySet {
		if all {
			return r.URL.Query()
		}
		return nil
	}
	q := r.URL.Query()
	var sel url.Values
	for _, name := range rt.c.query {
		if vs, ok := q[name]; ok {
			if sel == nil {
				sel = make(url.Values, len(rt.c.query))
			}
			sel[name] = vs
		}
	}
	return sel
}

// finish answers a request that went through Do or UseToken: the fresh
// response when the handler ran, the stored one on a replay, or the
// problem mapErr picks for err.
func (rt route) finish(w http.ResponseWriter, r *http.Request, rec *recorder, res idemkit.Result, err error,
	mapErr func(http.ResponseWriter, error) bool) {
	if rec.ran {
		rt.afterRun(r, rec, err)
		if rec.state == capturing {
			rec.writeFresh()
		}
		return
	}
	if err == nil && res.Replayed {
		sr, derr := decodeResponse(res.Value, rt.c.replayHeaders)
		if derr != nil {
			rt.c.log().ErrorContext(r.Context(), "idemhttp: stored response cannot be decoded", "error", derr)
			writeProblem(w, http.StatusInternalServerError, ProblemInternal, "the stored response cannot be read", 0)
			return
		}
		replay(w, sr)
		return
	}
	if err != nil && mapErr(w, err) {
		return
	}
	rt.internal(w, r, err)
}

// afterRun logs what went wrong around a handler that ran.
func (rt route) afterRun(r *http.Request, rec *recorder, err error) {
	ctx := r.Context()
	switch {
	case rec.state == overflowed:
		rt.warn(ctx, "idemhttp: response over the stored-size cap sent unguarded and not stored; key released", r, slog.Int("max_stored", rt.c.maxStored))
	case errors.Is(err, idemkit.ErrResultTooLarge):
		rt.warn(ctx, "idemhttp: encoded response over the engine's result cap; not stored, key released", r, slog.Any("error", err))
	case errors.Is(err, idemkit.ErrLeaseLost), errors.Is(err, idemkit.ErrUnavailable):
		rt.warn(ctx, "idemhttp: handler ran but its response could not be recorded", r, slog.Any("error", err))
	}
}

func (rt route) warn(ctx context.Context, msg string, r *http.Request, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("method", r.Method), slog.String("pattern", r.Pattern))
	rt.c.log().LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// common maps the errors every mode shares; it reports whether it answered.
func common(w http.ResponseWriter, err error) bool {
	var ce *idemkit.ConflictError
	switch {
	case errors.As(err, &ce) && errors.Is(err, idemkit.ErrInProgress):
		writeProblem(w, http.StatusConflict, ProblemInProgress,
			"a request with this key is still being processed; retry after the delay given", ce.RetryAfter)
	case errors.Is(err, idemkit.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeProblem(w, http.StatusServiceUnavailable, ProblemUnavailable,
			"duplicate protection is unavailable; the request was not processed", unavailableRetry)
	default:
		return false
	}
	return true
}

func (rt route) internal(w http.ResponseWriter, r *http.Request, err error) {
	rt.c.log().ErrorContext(r.Context(), "idemhttp: unexpected engine outcome", "error", err,
		"method", r.Method, "pattern", r.Pattern)
	writeProblem(w, http.StatusInternalServerError, ProblemInternal, "the request could not be processed", 0)
}
