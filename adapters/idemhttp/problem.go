package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// DefaultProblemBase is the prefix of every problem type URI unless
// WithProblemBase sets another, the same in every idemkit adapter. Each
// type URI names a documentation page (see ProblemTypes).
const DefaultProblemBase = httpcore.DefaultProblemBase

// Problem type URIs under DefaultProblemBase, one per error; the same in
// every idemkit adapter. The status each is sent with is given in the
// comment; ProblemTypes describes them.
const (
	ProblemKeyMissing        = httpcore.ProblemKeyMissing        // 400: no idempotency key
	ProblemKeyInvalid        = httpcore.ProblemKeyInvalid        // 400: malformed key
	ProblemInProgress        = httpcore.ProblemInProgress        // 409: first request still running; Retry-After
	ProblemKeyMismatch       = httpcore.ProblemKeyMismatch       // 422: key reused with another payload
	ProblemPayloadReused     = httpcore.ProblemPayloadReused     // 409: same payload under a new key (WithPayloadWindow)
	ProblemDuplicate         = httpcore.ProblemDuplicate         // 409: repeat inside a window; Retry-After
	ProblemTokenMissing      = httpcore.ProblemTokenMissing      // 400: no token
	ProblemTokenInvalid      = httpcore.ProblemTokenInvalid      // 400: unknown, expired, forged or other principal's token
	ProblemTokenUsed         = httpcore.ProblemTokenUsed         // 409: token already used, no stored outcome
	ProblemBodyTooLarge      = httpcore.ProblemBodyTooLarge      // 413: request body over the fingerprint cap
	ProblemBodyUnreadable    = httpcore.ProblemBodyUnreadable    // 400: request body could not be read
	ProblemUnauthenticated   = httpcore.ProblemUnauthenticated   // 401: the principal function failed
	ProblemResponseNotStored = httpcore.ProblemResponseNotStored // 500: replay of a response too large or streamed to keep
	ProblemOutcomeUnknown    = httpcore.ProblemOutcomeUnknown    // 500: replay of a request whose handler could not learn its outcome (OutcomeUnknown)
	ProblemUnavailable       = httpcore.ProblemUnavailable       // 503: store down (fail-closed); Retry-After
	ProblemInternal          = httpcore.ProblemInternal          // 500: unexpected engine error
)

// ProblemContentType is the media type of every error this package writes.
const ProblemContentType = httpcore.ProblemContentType

// Problem is an RFC 9457 problem details object, as written by the
// middleware for every error it answers itself. Clients can decode error
// bodies into it and switch on Type. The last three members are optional
// (WithProblemMembers).
type Problem = httpcore.Problem

// ProblemType documents one problem type: the demo server renders a page
// per type from this list, at the type URI.
type ProblemType = httpcore.ProblemType

// ProblemTypes returns a new slice describing every problem type the
// middleware can answer with, in a stable order.
func ProblemTypes() []ProblemType { return httpcore.Types() }

// ProblemMembers selects the optional members of the problem documents
// the middleware writes.
type ProblemMembers = httpcore.Members

// Optional problem members.
const (
	// MemberInstance adds "instance": a per-response identifier
	// (WithProblemInstance; a urn:uuid by default).
	MemberInstance = httpcore.MemberInstance
	// MemberRetryable adds "retryable": true exactly when the response
	// carries Retry-After.
	MemberRetryable = httpcore.MemberRetryable
	// MemberIdempotencyKey adds "idempotency_key": the client's own key,
	// back to the same client, in Idempotency mode.
	MemberIdempotencyKey = httpcore.MemberIdempotencyKey

	// DefaultProblemMembers holds every optional member.
	DefaultProblemMembers = httpcore.DefaultMembers
)

// UUIDInstance returns a fresh random URN, urn:uuid:<version 4 UUID>: the
// default problem instance (WithProblemInstance).
func UUIDInstance(r *http.Request) string { return httpcore.UUIDInstance(r) }

// WithProblemBase sets the prefix of the problem type URIs (default
// DefaultProblemBase): each type is base followed by the name
// ProblemTypes gives, such as "in-progress". base must be an absolute URI.
// Every constructor.
func WithProblemBase(base string) Option {
	return func(c *config) error {
		u, err := url.Parse(base)
		if err != nil || !u.IsAbs() || strings.ContainsAny(base, " \t\r\n") {
			return fmt.Errorf("WithProblemBase: %q is not an absolute URI", base)
		}
		c.problemBase = base
		return nil
	}
}

// WithProblemMembers selects the optional members of problem documents
// (default DefaultProblemMembers; 0 for none). Every constructor.
func WithProblemMembers(m ProblemMembers) Option {
	return func(c *config) error {
		if m&^DefaultProblemMembers != 0 {
			return fmt.Errorf("WithProblemMembers(%#x): unknown problem members", uint8(m))
		}
		c.members = m
		return nil
	}
}

// WithProblemInstance sets the function that names each problem response
// in its instance member (default UUIDInstance), for example to carry a
// request ID that appears in the server's logs. It must be safe for
// concurrent use and must not return secrets. Every constructor.
func WithProblemInstance(fn func(*http.Request) string) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithProblemInstance: nil problem instance function")
		}
		c.instance = fn
		return nil
	}
}

// problems writes a route's problem documents.
type problems struct {
	types    [httpcore.NumKinds]string // type URIs
	members  ProblemMembers
	instance func(*http.Request) string
	replay   string // the replay header, removed from every problem
}

func newProblems(c *config) problems {
	p := problems{members: c.members, instance: c.instance, replay: c.replayHeader}
	for k, t := range httpcore.Types() {
		p.types[k] = c.problemBase + t.Name
	}
	return p
}

// answer is one problem the middleware sends.
type answer struct {
	kind     httpcore.Kind
	detail   string
	retry    time.Duration // > 0 adds Retry-After, whole seconds rounded up
	key      string        // the client's idempotency key, echoed when enabled
	instance string        // set to name the response; else made when enabled
	replay   bool          // the answer is a stored outcome: mark it replayed
}

// write answers with an application/problem+json body.
func (p *problems) write(w http.ResponseWriter, r *http.Request, a answer) {
	t := a.kind.Type()
	doc := Problem{Type: p.types[a.kind], Title: t.Title, Status: t.Status, Detail: a.detail}
	if p.members&MemberInstance != 0 {
		doc.Instance = a.instance
		if doc.Instance == "" {
			doc.Instance = p.instance(r)
		}
	}
	if p.members&MemberRetryable != 0 {
		retryable := a.retry > 0
		doc.Retryable = &retryable
	}
	if p.members&MemberIdempotencyKey != 0 {
		doc.IdempotencyKey = a.key
	}
	if a.replay {
		w.Header().Set(p.replay, "true")
	} else {
		w.Header().Del(p.replay)
	}
	WriteProblem(w, &doc, a.retry)
}

// WriteProblem answers with doc as an application/problem+json body, not
// to be cached, with status doc.Status and, when retry is positive,
// Retry-After: retry in whole seconds, rounded up. Headers already in w's
// map stay, but for Content-Type, Cache-Control, Content-Length and
// Retry-After. The middleware writes its own problems with it; so can a
// handler or a proxy that answers beside it, for problems alike on the
// wire.
func WriteProblem(w http.ResponseWriter, doc *Problem, retry time.Duration) {
	body := doc.JSON()
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retry > 0 {
		h.Set("Retry-After", httpcore.RetrySeconds(retry))
	}
	w.WriteHeader(doc.Status)
	_, _ = w.Write(body)
}
