package idemhttp

import (
	"context"
	"errors"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Window returns middleware that rejects a repeat of the same request
// (by fingerprint, with no client key) inside a time window with 409 and
// Retry-After: a double click, a resubmitted form. The handler writes
// straight to the client; nothing is stored or replayed. The window
// (idemkit.WithWindow, default 5s) and what ends it early
// (idemkit.WithRelease; a response the store policy rejects counts as a
// failure) are engine options, set with WithEngineOptions. Errors and
// concurrency are as for Idempotency.
func Window(e *idemkit.Engine, opts ...Option) (func(http.Handler) http.Handler, error) {
	rt, err := newRoute(e, opts, modeWindow)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler { return &windowHandler{route: rt, next: next} }, nil
}

type windowHandler struct {
	*route
	next http.Handler
}

func (h *windowHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	principal, ok := h.enter(w, r, h.next)
	if !ok {
		return
	}
	body, ok := h.body(w, r)
	if !ok {
		return
	}
	// The key is keying.Key(transport, fingerprint), built in place: a
	// fingerprint is always a literal part.
	var text [64]byte
	var op [128]byte
	key := string(h.fp.AppendSum(append(text[:0], transport+":"...), principal, httpcore.Transient(appendOperation(op[:0], r)),
		h.params(r, false), body.b))
	ran := false
	var panicked any // what the handler panicked with after OutcomeUnknown
	err := h.e.Guard(r.Context(), key, func(context.Context) (err error) {
		ran = true
		sw := &statusWriter{ResponseWriter: w}
		body.restore(r, &sw.in)
		defer func() {
			// After OutcomeUnknown the claim is kept, also when the
			// handler then aborts; the panic goes on after Guard.
			if sw.unknown {
				if v := recover(); v != nil {
					panicked, err = v, nil
				}
			}
		}()
		h.next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), windowKey{}, sw)))
		if !sw.unknown && !h.c.store(sw.result()) {
			return errNotStored
		}
		return nil
	}, scope(principal))
	if panicked != nil {
		panic(panicked)
	}
	if ran {
		return
	}
	body.release()
	var ce *idemkit.ConflictError
	a, ok := common(err)
	if errors.As(err, &ce) && errors.Is(err, idemkit.ErrDuplicate) {
		a, ok = answer{kind: httpcore.KindDuplicate, retry: ce.RetryAfter,
			detail: "the same request was already submitted; retry after the delay given if it is meant to run again"}, true
	}
	if !ok {
		h.internal(w, r, err, "")
		return
	}
	h.p.write(w, r, a)
}
