package idemhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// Idempotency returns middleware that makes a handler idempotent per
// client key (draft-ietf-httpapi-idempotency-key-header): the first request
// with a key runs the handler and its response is stored; a retry gets the
// stored response, a concurrent one 409, one with another payload 422. See
// the package doc for keys, fingerprints and status codes. It returns an
// error wrapping idemkit.ErrInvalid for a nil engine, a missing principal
// or an invalid option; its handlers are safe for concurrent use.
func Idempotency(e *idemkit.Engine, opts ...Option) (func(http.Handler) http.Handler, error) {
	rt, err := newRoute(e, opts, modeKey)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler { return &keyHandler{route: rt, next: next} }, nil
}

type keyHandler struct {
	*route
	next http.Handler
}

func (h *keyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	principal, ok := h.enter(w, r, h.next)
	if !ok {
		return
	}
	var body reqBody
	if h.c.keyFrom != nil && h.c.keyFrom.fromBody() {
		if body, ok = h.body(w, r); !ok {
			return
		}
	}
	key, present, err := h.key(r, body.b)
	switch {
	case err != nil:
		body.release()
		h.p.write(w, r, answer{kind: httpcore.KindKeyInvalid, detail: h.keyWhere(false) + ": " + err.Error()})
		return
	case !present && h.c.optionalKey:
		body.restore(r, &bodyReader{})
		h.next.ServeHTTP(w, r)
		return
	case !present:
		body.release()
		h.p.write(w, r, answer{kind: httpcore.KindKeyMissing, detail: "this request requires an " + h.keyWhere(true)})
		return
	}
	if h.c.keyFrom == nil || !h.c.keyFrom.fromBody() {
		if body, ok = h.body(w, r); !ok {
			return
		}
	}
	fpBody := body.b
	if h.c.callback && h.fpDefault {
		fpBody = nil // a callback is the same event whatever else its retry says
	}
	// The fingerprint and the engine key share one string. The principal
	// scopes the key (and the payload check), so a record is only ever
	// compared with the same principal's requests: the fingerprint leaves
	// it out, which keeps a small request's hash input within one block.
	var text [128]byte
	var op [128]byte
	b := h.fp.AppendSum(text[:0], "", httpcore.Transient(appendOperation(op[:0], r)), h.params(r, true), fpBody)
	both := string(keying.AppendKey(b, transport, key))
	fp, engineKey := both[:len(b)], both[len(b):]
	if h.payload != nil && !h.firstKeyFor(w, r, principal, key, fp) {
		body.release()
		return
	}
	var in idemkit.Option // WithResume's
	if h.c.resumeName != "" {
		var ok bool
		if in, ok = h.c.resumeInput(r, body.b); !ok {
			body.release()
			h.p.write(w, r, answer{kind: httpcore.KindBodyTooLarge, detail: fmt.Sprintf("the request, with its stored headers, is over the %d bytes a resumable request may have", idemkit.MaxInputLen)})
			return
		}
	}
	var rec *recorder // set when the handler runs
	fn := func(ctx context.Context) ([]byte, error) {
		rec = newRecorder(w, h.c)
		return rec.serve(ctx, h.next, r, &body)
	}
	var res idemkit.Result
	if in == nil {
		res, err = h.e.Do(r.Context(), engineKey, fp, fn, scope(principal))
	} else {
		res, err = h.e.Do(r.Context(), engineKey, fp, fn, scope(principal), in)
	}
	if rec == nil {
		body.release()
	}
	h.finish(w, r, rec, res, err, key, keyProblem)
}

// key reads the request's idempotency key from the key header, or from
// WithKeyFrom's source.
func (h *keyHandler) key(r *http.Request, body []byte) (string, bool, error) {
	if h.c.keyFrom == nil {
		return httpcore.HeaderKey(r.Header[h.c.keyHeader])
	}
	return h.c.keyFrom.read(r, body)
}

// keyWhere names where the key is read from, for problem details: the
// header's name, or the source; with missing, as what a request lacks.
func (h *keyHandler) keyWhere(missing bool) string {
	switch {
	case h.c.keyFrom == nil && missing:
		return h.c.keyHeader + " header"
	case h.c.keyFrom == nil:
		return h.c.keyHeader
	case missing:
		return "idempotency key in its " + h.c.keyFrom.what
	}
	return h.c.keyFrom.what
}

func keyProblem(err error) (answer, bool) {
	if errors.Is(err, idemkit.ErrMismatch) {
		return answer{kind: httpcore.KindKeyMismatch, detail: "this idempotency key was already used with a different request payload"}, true
	}
	return common(err)
}

// firstKeyFor is the payload guard (WithPayloadWindow): it binds the
// payload fingerprint fp to the first key it came with, for the window,
// and answers 409 itself when fp came with another key. It reports
// whether the request may go on.
func (h *keyHandler) firstKeyFor(w http.ResponseWriter, r *http.Request, principal, key, fp string) bool {
	sum := sha256.Sum256([]byte(key)) // the record holds a digest of the key, never the key
	_, err := h.payload.Do(r.Context(), keying.Key(transport, "payload", fp), hex.EncodeToString(sum[:]),
		func(context.Context) ([]byte, error) { return []byte{}, nil }, scope(principal))
	if err == nil {
		return true
	}
	a, ok := common(err)
	if errors.Is(err, idemkit.ErrMismatch) {
		a, ok = answer{kind: httpcore.KindPayloadReused,
			detail: "the same request was submitted a moment ago under another idempotency key; retry with that key"}, true
	}
	if !ok {
		h.internal(w, r, err, key)
		return false
	}
	a.key = key
	h.p.write(w, r, a)
	return false
}
