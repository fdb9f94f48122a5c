package idemhttp

import (
	"context"
	"errors"
	"net/http"

	"github.com/idemkit/idemkit"
)

// Window returns middleware that rejects repeats of the same request
// inside a time window, without any client key: a double click, a
// resubmitted form, a client retry.
//
// A request is identified by its fingerprint: principal (WithPrincipal,
// required), method, route pattern, path, the selected query parameters
// (WithQueryParams; none by default) and the canonical body with volatile
// fields dropped (WithVolatile). The first request runs the handler, which
// writes straight to the client (nothing is stored or replayed); a repeat
// inside the window gets 409 with Retry-After set to the window's
// remaining time. The window (idemkit.WithWindow, default 5s) and what
// ends it early (idemkit.WithRelease) are engine options, set per route
// with WithEngineOptions; for idemkit.ReleaseOnError, a response the store
// policy does not accept (5xx by default) counts as a failure.
//
// Only guarded methods (WithMethods) are checked. Bodies over the cap get
// 413, principal errors 401, a store failure 503 (or, fail-open, the
// handler runs). As with Idempotency, wrap the handler registered on the
// ServeMux so that r.Pattern is set. The handlers it returns are safe for
// concurrent use.
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
	fp := h.fp.Sum(principal, operation(r), h.params(r, false), body)
	ran := false
	err := h.e.Guard(r.Context(), transport+":"+fp, func(context.Context) error {
		ran = true
		sw := &statusWriter{ResponseWriter: w}
		h.next.ServeHTTP(sw, r)
		if !h.c.store(sw.result()) {
			return errNotStored
		}
		return nil
	}, h.opts...)
	if ran {
		return
	}
	var ce *idemkit.ConflictError
	a, ok := common(err)
	if errors.As(err, &ce) && errors.Is(err, idemkit.ErrDuplicate) {
		a, ok = answer{kind: kindDuplicate, retry: ce.RetryAfter,
			detail: "the same request was already submitted; retry after the delay given if it is meant to run again"}, true
	}
	if !ok {
		h.internal(w, r, err, "")
		return
	}
	h.p.write(w, r, a)
}
