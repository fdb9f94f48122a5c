package idemhttp

import (
	"errors"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// Idempotency returns middleware that makes a handler idempotent per
// client key, following draft-ietf-httpapi-idempotency-key-header (and
// Stripe's behaviour where the draft is silent).
//
// For guarded methods (POST and PATCH by default, see WithMethods) the key
// is read from the Idempotency-Key header (WithKeyHeader) as an RFC 8941
// sf-string or a bare token, 1 to MaxKeyLen printable ASCII characters.
// The key is scoped by the principal (WithPrincipal, required) and the
// request payload is fingerprinted: method, route pattern, path, query
// (see WithQueryParams) and canonical body (see WithVolatile). Then:
//
//   - no key: 400 (unless WithOptionalKey); malformed key: 400; body over
//     the cap: 413; principal error: 401;
//   - first request: the handler runs, its response is sent and, when the
//     store policy accepts its status, stored;
//   - the key while the first request runs: 409 with Retry-After, or with
//     WithWait the first response once it is stored;
//   - the key with another payload: 422;
//   - the key after a stored response: the stored status, allow-listed
//     headers and body, with Idempotent-Replayed: true;
//   - store down: 503 with Retry-After, or with
//     WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)) the
//     handler runs unguarded.
//
// Responses that are not stored (5xx by default) release the key, so a
// retry runs the handler again. Streaming responses (the handler calls
// Flush or Hijack) and responses over WithMaxStoredResponse are sent as
// they are written and are not guarded: the key is released.
//
// Wrap the handler you register on an http.ServeMux, not the mux itself:
// ServeMux sets r.Pattern only after routing, so middleware around the mux
// sees an empty pattern. It returns an error wrapping idemkit.ErrInvalid
// for a nil engine, a missing principal or an invalid option. The handlers
// it returns are safe for concurrent use.
func Idempotency(e *idemkit.Engine, opts ...Option) (func(http.Handler) http.Handler, error) {
	rt, err := newRoute(e, opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler { return &keyHandler{route: rt, next: next} }, nil
}

type keyHandler struct {
	route
	next http.Handler
}

func (h *keyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	principal, ok := h.enter(w, r, h.next)
	if !ok {
		return
	}
	key, present, err := headerKey(r.Header[h.c.keyHeader])
	switch {
	case err != nil:
		writeProblem(w, http.StatusBadRequest, ProblemKeyInvalid, h.c.keyHeader+": "+err.Error(), 0)
		return
	case !present && h.c.optionalKey:
		h.next.ServeHTTP(w, r)
		return
	case !present:
		writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "this request requires an "+h.c.keyHeader+" header", 0)
		return
	}
	body, ok := h.body(w, r)
	if !ok {
		return
	}
	fp := h.c.fp.Sum(principal, operation(r), h.params(r, true), body)
	rec := newRecorder(w, h.c.maxStored)
	res, err := h.e.Do(r.Context(), keying.Key("http", principal, key), fp, rec.run(h.next, r, h.c), h.c.callOpts...)
	h.finish(w, r, rec, res, err, keyProblem)
}

func keyProblem(w http.ResponseWriter, err error) bool {
	if errors.Is(err, idemkit.ErrMismatch) {
		writeProblem(w, http.StatusUnprocessableEntity, ProblemKeyMismatch,
			"this idempotency key was already used with a different request payload", 0)
		return true
	}
	return common(w, err)
}
