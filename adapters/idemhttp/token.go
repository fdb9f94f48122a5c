package idemhttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Token returns middleware that requires a one-time token, issued by
// TokenIssuer to the same principal, on every guarded request, and spends
// it before the handler runs: the first use runs the handler; a reuse gets
// the stored response, or 409 while the first runs or when its outcome was
// not stored; an unknown, expired or other principal's token gets 400. The
// token comes from the token header or, WithTokenField, a form field.
// Errors and concurrency are as for Idempotency.
func Token(e *idemkit.Engine, opts ...Option) (func(http.Handler) http.Handler, error) {
	rt, err := newRoute(e, opts, modeToken)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler { return &tokenHandler{route: rt, next: next} }, nil
}

type tokenHandler struct {
	*route
	next http.Handler
}

func (h *tokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	principal, ok := h.enter(w, r, h.next)
	if !ok {
		return
	}
	token, body, ok := h.token(w, r)
	if !ok {
		return
	}
	var rec *recorder // set when the handler runs
	res, err := h.e.UseToken(r.Context(), principal, token, func(ctx context.Context) ([]byte, error) {
		rec = newRecorder(w, h.c)
		return rec.serve(ctx, h.next, r, &body)
	})
	if rec == nil {
		body.release()
	}
	h.finish(w, r, rec, res, err, "", tokenProblem)
}

// token reads the request's token from the header or, failing that and
// when WithTokenField is set, from the form field. It answers 400 or 413
// itself and reports false. body is the request body when it was read
// for the form field, for the handler.
func (h *tokenHandler) token(w http.ResponseWriter, r *http.Request) (token string, body reqBody, ok bool) {
	token, present, err := httpcore.HeaderKey(r.Header[h.c.tokenHeader])
	from := h.c.tokenHeader
	if !present && err == nil && h.c.tokenField != "" && isForm(r) {
		if body, ok = h.body(w, r); !ok {
			return "", body, false
		}
		token, present, err = formToken(r, body.b, h.c.tokenField)
		from = "form field " + h.c.tokenField
	}
	if err != nil || !present {
		body.release()
	}
	switch {
	case err != nil:
		h.p.write(w, r, answer{kind: httpcore.KindTokenInvalid, detail: from + ": " + err.Error()})
		return "", body, false
	case !present && h.c.tokenField != "":
		h.p.write(w, r, answer{kind: httpcore.KindTokenMissing,
			detail: "this request requires an " + h.c.tokenHeader + " header or a " + h.c.tokenField + " form field"})
		return "", body, false
	case !present:
		h.p.write(w, r, answer{kind: httpcore.KindTokenMissing, detail: "this request requires an " + h.c.tokenHeader + " header"})
		return "", body, false
	}
	return token, body, true
}

func tokenProblem(err error) (answer, bool) {
	switch {
	case errors.Is(err, idemkit.ErrTokenUsed):
		return answer{kind: httpcore.KindTokenUsed,
			detail: "this token was already used and its outcome was not stored; request a new token"}, true
	case errors.Is(err, idemkit.ErrTokenInvalid):
		return answer{kind: httpcore.KindTokenInvalid,
			detail: "the token is unknown, expired or was not issued to this caller"}, true
	}
	return common(err)
}

// IssuedToken is the JSON body TokenIssuer answers with.
type IssuedToken struct {
	// Token is the one-time token, to send back in the token header.
	Token string `json:"token"`
	// ExpiresIn is the token's lifetime in whole seconds.
	ExpiresIn int64 `json:"expires_in"`
}

// TokenIssuer returns a handler that issues a one-time token bound to the
// request's principal, answering 201 with an IssuedToken JSON body and
// Cache-Control: no-store; the token lives for the engine's token TTL
// (idemkit.WithTokenTTL). Issuing needs the store whatever the failure
// mode (503 when it fails). It answers every method: register it with the
// one you want.
func TokenIssuer(e *idemkit.Engine, opts ...Option) (http.Handler, error) {
	rt, err := newRoute(e, opts, modeIssuer)
	if err != nil {
		return nil, err
	}
	return &issuer{route: rt}, nil
}

type issuer struct{ *route }

func (h *issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	principal, ok := h.principal(w, r)
	if !ok {
		return
	}
	tok, err := h.e.IssueToken(r.Context(), principal)
	if err != nil {
		if a, ok := common(err); ok {
			h.p.write(w, r, a)
		} else {
			h.internal(w, r, err, "")
		}
		return
	}
	secs := int64((tok.ExpiresIn + time.Second - 1) / time.Second)
	body, _ := json.Marshal(IssuedToken{Token: tok.Value, ExpiresIn: secs})
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}
