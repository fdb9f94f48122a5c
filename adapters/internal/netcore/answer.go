package netcore

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Answer is a problem the guard answers with instead of the handler.
type Answer struct {
	Kind   httpcore.Kind
	Detail string
	// Retry, when positive, is sent as Retry-After.
	Retry time.Duration
	// Replayed marks the problem of a terminal record: the request ran
	// once and its response was not kept.
	Replayed bool
}

// Status returns the answer's HTTP status.
func (a *Answer) Status() int { return a.Kind.Type().Status }

// Problem returns a's problem document, under the guard's problem base,
// without the optional members.
func (g *Guard) Problem(a Answer) httpcore.Problem {
	t := a.Kind.Type()
	return httpcore.Problem{Type: g.c.ProblemBase + t.Name, Title: t.Title, Status: t.Status, Detail: a.Detail}
}

// SetHeaders sets on h the headers a goes with, whatever form its body
// takes: Cache-Control: no-store, Retry-After, and the replay header
// exactly when a is Replayed.
func (g *Guard) SetHeaders(h http.Header, a Answer) {
	h.Set("Cache-Control", "no-store")
	if a.Retry > 0 {
		h.Set("Retry-After", httpcore.RetrySeconds(a.Retry))
	}
	if a.Replayed {
		h.Set(g.c.ReplayHeader, "true")
	} else {
		h.Del(g.c.ReplayHeader)
	}
}

// WriteProblem answers with the problem+json document of a. Headers that
// earlier middleware set (CORS, request ids) stay.
func (g *Guard) WriteProblem(w http.ResponseWriter, a Answer) {
	p := g.Problem(a)
	body := p.JSON()
	h := w.Header()
	g.SetHeaders(h, a)
	h.Set("Content-Type", httpcore.ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(a.Status())
	_, _ = w.Write(body)
}

// errCorruptResponse is what WriteStored returns for a stored value that
// does not decode.
var errCorruptResponse = errors.New("corrupt stored response")

// WriteStored writes the stored response b to w, replacing what the
// headers named in b held, and marks it replayed with header replay. b is checked whole
// before w is touched. The header names and values alias b, which must
// not change while the response is written (a stored value never does):
// a replay allocates one slice for them all, the replay header and
// Content-Length included.
func WriteStored(w http.ResponseWriter, b []byte, replay string) error {
	stored, err := httpcore.Decode(b)
	if err != nil {
		return errCorruptResponse
	}
	vals := make([]string, stored.Values+2)
	h := w.Header()
	for range stored.Headers {
		name := httpcore.Transient(stored.Field())
		k := stored.Count()
		for j := range k {
			vals[j] = httpcore.Transient(stored.Field())
		}
		h[name], vals = vals[:k:k], vals[k:]
	}
	vals[0] = "true"
	h[replay] = vals[0:1:1]
	if bodyAllowed(stored.Status) {
		vals[1] = strconv.Itoa(len(stored.Body))
		h["Content-Length"] = vals[1:2:2]
	}
	w.WriteHeader(stored.Status)
	if len(stored.Body) > 0 {
		_, _ = w.Write(stored.Body)
	}
	return nil
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// common maps the engine errors every mode meets before the handler runs;
// ok is false for an unexpected one.
func common(err error) (Answer, bool) {
	var ce *idemkit.ConflictError
	switch {
	case errors.Is(err, idemkit.ErrMismatch):
		return Answer{Kind: httpcore.KindKeyMismatch, Detail: httpcore.DetailKeyMismatch}, true
	case errors.Is(err, idemkit.ErrInProgress) && errors.As(err, &ce):
		return Answer{Kind: httpcore.KindInProgress, Detail: httpcore.DetailInProgress, Retry: ce.RetryAfter}, true
	case errors.Is(err, idemkit.ErrDuplicate) && errors.As(err, &ce):
		return Answer{Kind: httpcore.KindDuplicate, Retry: ce.RetryAfter,
			Detail: "the same request was already submitted; retry after the delay given if it is meant to run again"}, true
	case errors.Is(err, idemkit.ErrTokenUsed):
		return Answer{Kind: httpcore.KindTokenUsed,
			Detail: "this token was already used and its outcome was not stored; request a new token"}, true
	case errors.Is(err, idemkit.ErrTokenInvalid):
		return Answer{Kind: httpcore.KindTokenInvalid,
			Detail: "the token is unknown, expired or was not issued to this caller"}, true
	case errors.Is(err, idemkit.ErrResultTooLarge):
		// The engine's terminal record (idemkit.WithOversized): the
		// handler ran, its response was over the engine's result cap.
		return Answer{Kind: httpcore.KindResponseNotStored, Detail: httpcore.DetailTooLarge, Replayed: true}, true
	case errors.Is(err, idemkit.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Answer{Kind: httpcore.KindUnavailable, Detail: httpcore.DetailUnavailable, Retry: httpcore.UnavailableRetry}, true
	}
	return Answer{}, false
}
