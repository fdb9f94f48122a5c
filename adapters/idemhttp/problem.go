package idemhttp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultProblemBase is the prefix of every problem type URI unless
// WithProblemBase sets another. Each type URI names a documentation page
// (see ProblemTypes).
const DefaultProblemBase = "https://idemkit.dev/problems/"

// Problem type URIs under DefaultProblemBase, one per error. The status
// each is sent with is given in the comment; ProblemTypes describes them.
const (
	ProblemKeyMissing        = DefaultProblemBase + "key-missing"         // 400: no idempotency key
	ProblemKeyInvalid        = DefaultProblemBase + "key-invalid"         // 400: malformed key
	ProblemInProgress        = DefaultProblemBase + "in-progress"         // 409: first request still running; Retry-After
	ProblemKeyMismatch       = DefaultProblemBase + "key-mismatch"        // 422: key reused with another payload
	ProblemPayloadReused     = DefaultProblemBase + "payload-reused"      // 409: same payload under a new key (WithPayloadWindow)
	ProblemDuplicate         = DefaultProblemBase + "duplicate"           // 409: repeat inside a window; Retry-After
	ProblemTokenMissing      = DefaultProblemBase + "token-missing"       // 400: no token
	ProblemTokenInvalid      = DefaultProblemBase + "token-invalid"       // 400: unknown, expired, forged or other principal's token
	ProblemTokenUsed         = DefaultProblemBase + "token-used"          // 409: token already used, no stored outcome
	ProblemBodyTooLarge      = DefaultProblemBase + "body-too-large"      // 413: request body over the fingerprint cap
	ProblemBodyUnreadable    = DefaultProblemBase + "body-unreadable"     // 400: request body could not be read
	ProblemUnauthenticated   = DefaultProblemBase + "unauthenticated"     // 401: the principal function failed
	ProblemResponseNotStored = DefaultProblemBase + "response-not-stored" // 500: replay of a response too large or streamed to keep
	ProblemOutcomeUnknown    = DefaultProblemBase + "outcome-unknown"     // 500: replay of a request whose handler could not learn its outcome (OutcomeUnknown)
	ProblemUnavailable       = DefaultProblemBase + "unavailable"         // 503: store down (fail-closed); Retry-After
	ProblemInternal          = DefaultProblemBase + "internal"            // 500: unexpected engine error
)

// ProblemContentType is the media type of every error this package writes.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object, as written by the
// middleware for every error it answers itself. Clients can decode error
// bodies into it and switch on Type. The last three members are optional
// (WithProblemMembers).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance identifies this one response, a urn:uuid by default.
	Instance string `json:"instance,omitempty"`
	// Retryable is true exactly when the response carries Retry-After.
	Retryable *bool `json:"retryable,omitempty"`
	// IdempotencyKey echoes the client's own idempotency key (Idempotency
	// mode only; never a token or the principal).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ProblemType documents one problem type: the demo server renders a page
// per type from this list, at the type URI.
type ProblemType struct {
	// Name is the last segment of the type URI, e.g. "in-progress".
	Name string
	// Status is the HTTP status the problem is sent with.
	Status int
	// Title is the problem document's title member.
	Title string
	// Description says, for a documentation page, what happened and what
	// a client should do.
	Description string
}

// problemKind indexes problemTypes.
type problemKind uint8

const (
	kindKeyMissing problemKind = iota
	kindKeyInvalid
	kindInProgress
	kindKeyMismatch
	kindPayloadReused
	kindDuplicate
	kindTokenMissing
	kindTokenInvalid
	kindTokenUsed
	kindBodyTooLarge
	kindBodyUnreadable
	kindUnauthenticated
	kindResponseNotStored
	kindOutcomeUnknown
	kindUnavailable
	kindInternal
	numKinds
)

var problemTypes = [numKinds]ProblemType{
	kindKeyMissing: {"key-missing", http.StatusBadRequest, "Idempotency key missing",
		"The request needs an idempotency key header and had none. Send a fresh, unique key (a UUID, say) with the request, and the same key with every retry of it."},
	kindKeyInvalid: {"key-invalid", http.StatusBadRequest, "Idempotency key invalid",
		"The idempotency key header is repeated, empty, too long or not printable ASCII. Send one key of 1 to 255 printable characters, bare or as a quoted string."},
	kindInProgress: {"in-progress", http.StatusConflict, "Request in progress",
		"A request with this idempotency key is still being processed. Retry with the same key after the Retry-After delay to get its outcome."},
	kindKeyMismatch: {"key-mismatch", http.StatusUnprocessableEntity, "Idempotency key reused with a different payload",
		"This idempotency key was already used for a request with another payload. A retry must repeat the first request exactly; a new request needs a new key."},
	kindPayloadReused: {"payload-reused", http.StatusConflict, "Payload already submitted under another key",
		"The same request was submitted a moment ago under another idempotency key, as a double click that mints a key per click does. Retry with the first key to get its outcome; send a new key only for a request that is meant to run again."},
	kindDuplicate: {"duplicate", http.StatusConflict, "Duplicate request",
		"The same request was already submitted inside the duplicate-protection window. If it is meant to run again, send it after the Retry-After delay."},
	kindTokenMissing: {"token-missing", http.StatusBadRequest, "Token missing",
		"The request needs a one-time token and had none. Get a token from the issuing endpoint and send it with the request."},
	kindTokenInvalid: {"token-invalid", http.StatusBadRequest, "Token invalid",
		"The one-time token is malformed, unknown, expired, or was issued to another caller. Get a new token."},
	kindTokenUsed: {"token-used", http.StatusConflict, "Token already used",
		"The one-time token was already spent and its outcome was not stored. No retry with it can succeed: get a new token if the request is meant to run again."},
	kindBodyTooLarge: {"body-too-large", http.StatusRequestEntityTooLarge, "Request body too large",
		"The request body is over the size this endpoint reads to recognise repeats. Send a smaller body."},
	kindBodyUnreadable: {"body-unreadable", http.StatusBadRequest, "Request body unreadable",
		"The request body could not be read to the end. Send the request again."},
	kindUnauthenticated: {"unauthenticated", http.StatusUnauthorized, "Unauthenticated",
		"The caller of the request could not be identified, and duplicate protection is kept per caller. Authenticate and send the request again."},
	kindResponseNotStored: {"response-not-stored", http.StatusInternalServerError, "Response not stored",
		"The first request with this key or token was processed, but its response was too large or streamed, so it could not be kept for replay. The request is not processed again; its outcome must be looked up another way. A retry gets this answer again."},
	kindOutcomeUnknown: {"outcome-unknown", http.StatusInternalServerError, "Outcome unknown",
		"The first request with this key or token may have been processed, but the server could not learn its outcome (a service behind it timed out or broke off its answer). The request is not processed again, so that it cannot run twice; its outcome must be looked up another way. A retry gets this answer again."},
	kindUnavailable: {"unavailable", http.StatusServiceUnavailable, "Service unavailable",
		"Duplicate protection is unavailable for a moment, so the request was not processed. Retry with the same key or token after the Retry-After delay."},
	kindInternal: {"internal", http.StatusInternalServerError, "Internal error",
		"The request could not be processed because of an unexpected server error."},
}

// ProblemTypes returns a new slice describing every problem type the
// middleware can answer with, in a stable order.
func ProblemTypes() []ProblemType {
	return append([]ProblemType(nil), problemTypes[:]...)
}

// unavailableRetry is the Retry-After sent with 503 when the store fails.
const unavailableRetry = time.Second

// ProblemMembers selects the optional members of the problem documents
// the middleware writes.
type ProblemMembers uint8

// Optional problem members.
const (
	// MemberInstance adds "instance": a per-response identifier
	// (WithProblemInstance; a urn:uuid by default).
	MemberInstance ProblemMembers = 1 << iota
	// MemberRetryable adds "retryable": true exactly when the response
	// carries Retry-After.
	MemberRetryable
	// MemberIdempotencyKey adds "idempotency_key": the client's own key,
	// back to the same client, in Idempotency mode.
	MemberIdempotencyKey

	// DefaultProblemMembers holds every optional member.
	DefaultProblemMembers = MemberInstance | MemberRetryable | MemberIdempotencyKey
)

// UUIDInstance returns a fresh random URN, urn:uuid:<version 4 UUID>: the
// default problem instance (WithProblemInstance).
func UUIDInstance(*http.Request) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [45]byte
	copy(b[:], "urn:uuid:")
	hex.Encode(b[9:17], u[0:4])
	b[17] = '-'
	hex.Encode(b[18:22], u[4:6])
	b[22] = '-'
	hex.Encode(b[23:27], u[6:8])
	b[27] = '-'
	hex.Encode(b[28:32], u[8:10])
	b[32] = '-'
	hex.Encode(b[33:45], u[10:16])
	return string(b[:])
}

// WithProblemBase sets the prefix of the problem type URIs (default
// DefaultProblemBase): each type is base followed by the name
// ProblemTypes gives, such as "in-progress". base must be an absolute URI.
// Every constructor.
func WithProblemBase(base string) Option {
	return func(c *config) {
		u, err := url.Parse(base)
		if err != nil || !u.IsAbs() || strings.ContainsAny(base, " \t\r\n") {
			c.invalid("problem base %q is not an absolute URI", base)
			return
		}
		c.problemBase = base
	}
}

// WithProblemMembers selects the optional members of problem documents
// (default DefaultProblemMembers; 0 for none). Every constructor.
func WithProblemMembers(m ProblemMembers) Option {
	return func(c *config) {
		if m&^DefaultProblemMembers != 0 {
			c.invalid("unknown problem members %#x", uint8(m))
			return
		}
		c.members = m
	}
}

// WithProblemInstance sets the function that names each problem response
// in its instance member (default UUIDInstance), for example to carry a
// request ID that appears in the server's logs. It must be safe for
// concurrent use and must not return secrets. Every constructor.
func WithProblemInstance(fn func(*http.Request) string) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("nil problem instance function")
			return
		}
		c.instance = fn
	}
}

// problems writes a route's problem documents.
type problems struct {
	types    [numKinds]string // type URIs
	members  ProblemMembers
	instance func(*http.Request) string
	replay   string // the replay header, removed from every problem
}

func newProblems(c *config) problems {
	p := problems{members: c.members, instance: c.instance, replay: c.replayHeader}
	for k, t := range problemTypes {
		p.types[k] = c.problemBase + t.Name
	}
	return p
}

// answer is one problem the middleware sends.
type answer struct {
	kind     problemKind
	detail   string
	retry    time.Duration // > 0 adds Retry-After, whole seconds rounded up
	key      string        // the client's idempotency key, echoed when enabled
	instance string        // set to name the response; else made when enabled
	replay   bool          // the answer is a stored outcome: mark it replayed
}

// write answers with an application/problem+json body.
func (p *problems) write(w http.ResponseWriter, r *http.Request, a answer) {
	t := &problemTypes[a.kind]
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
	body, err := json.Marshal(doc)
	if err != nil { // cannot happen for these field types
		body = []byte(`{"type":"` + p.types[kindInternal] + `"}`)
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if a.replay {
		h.Set(p.replay, "true")
	} else {
		h.Del(p.replay)
	}
	if a.retry > 0 {
		h.Set("Retry-After", retrySeconds(a.retry))
	}
	w.WriteHeader(t.Status)
	_, _ = w.Write(body)
}

// retrySeconds formats d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func retrySeconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(s), 1), 10)
}
