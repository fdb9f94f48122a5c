package httpcore

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// DefaultProblemBase is the prefix of every problem type URI an adapter
// writes unless configured otherwise. Each type URI names a documentation
// page (see Types).
const DefaultProblemBase = "https://idemkit.dev/problems/"

// Problem type URIs under DefaultProblemBase, one per error. The status
// each is sent with is given in the comment; Types describes them.
const (
	ProblemKeyMissing        = DefaultProblemBase + "key-missing"         // 400: no idempotency key
	ProblemKeyInvalid        = DefaultProblemBase + "key-invalid"         // 400: malformed or repeated key
	ProblemInProgress        = DefaultProblemBase + "in-progress"         // 409: first request still running; Retry-After
	ProblemKeyMismatch       = DefaultProblemBase + "key-mismatch"        // 422: key reused with another payload
	ProblemPayloadReused     = DefaultProblemBase + "payload-reused"      // 409: same payload under a new key
	ProblemDuplicate         = DefaultProblemBase + "duplicate"           // 409: repeat inside a window; Retry-After
	ProblemTokenMissing      = DefaultProblemBase + "token-missing"       // 400: no token
	ProblemTokenInvalid      = DefaultProblemBase + "token-invalid"       // 400: unknown, expired, forged or other principal's token
	ProblemTokenUsed         = DefaultProblemBase + "token-used"          // 409: token already used, no stored outcome
	ProblemBodyTooLarge      = DefaultProblemBase + "body-too-large"      // 413: request body over the fingerprint cap
	ProblemBodyUnreadable    = DefaultProblemBase + "body-unreadable"     // 400: request body could not be read
	ProblemUnauthenticated   = DefaultProblemBase + "unauthenticated"     // 401: the principal function failed
	ProblemResponseNotStored = DefaultProblemBase + "response-not-stored" // 500: replay of a response too large or streamed to keep
	ProblemOutcomeUnknown    = DefaultProblemBase + "outcome-unknown"     // 500: replay of a request whose outcome could not be learned
	ProblemUnavailable       = DefaultProblemBase + "unavailable"         // 503: store down (fail-closed); Retry-After
	ProblemInternal          = DefaultProblemBase + "internal"            // 500: unexpected engine error
)

// ProblemContentType is the media type of every error an adapter writes.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object, as the adapters write
// it for every error they answer themselves. Clients can decode error
// bodies into it and switch on Type. The last three members are optional
// (Members).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance identifies this one response, a urn:uuid by default.
	Instance string `json:"instance,omitempty"`
	// Retryable is true exactly when the response carries Retry-After.
	Retryable *bool `json:"retryable,omitempty"`
	// IdempotencyKey echoes the client's own idempotency key (never a
	// token or the principal).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// JSON returns the problem document.
func (p *Problem) JSON() []byte {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for these field types
		return []byte(`{"type":` + strconv.Quote(p.Type) + `}`)
	}
	return body
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

// Kind names a problem type of the catalogue.
type Kind uint8

// The problem kinds, in the order Types lists them.
const (
	KindKeyMissing Kind = iota
	KindKeyInvalid
	KindInProgress
	KindKeyMismatch
	KindPayloadReused
	KindDuplicate
	KindTokenMissing
	KindTokenInvalid
	KindTokenUsed
	KindBodyTooLarge
	KindBodyUnreadable
	KindUnauthenticated
	KindResponseNotStored
	KindOutcomeUnknown
	KindUnavailable
	KindInternal
	NumKinds // the number of kinds
)

var types = [NumKinds]ProblemType{
	KindKeyMissing: {"key-missing", http.StatusBadRequest, "Idempotency key missing",
		"The request needs an idempotency key header and had none. Send a fresh, unique key (a UUID, say) with the request, and the same key with every retry of it."},
	KindKeyInvalid: {"key-invalid", http.StatusBadRequest, "Idempotency key invalid",
		"The idempotency key header is repeated, empty, too long or not printable ASCII. Send one key of 1 to 255 printable characters, bare or as a quoted string."},
	KindInProgress: {"in-progress", http.StatusConflict, "Request in progress",
		"A request with this idempotency key is still being processed. Retry with the same key after the Retry-After delay to get its outcome."},
	KindKeyMismatch: {"key-mismatch", http.StatusUnprocessableEntity, "Idempotency key reused with a different payload",
		"This idempotency key was already used for a request with another payload. A retry must repeat the first request exactly; a new request needs a new key."},
	KindPayloadReused: {"payload-reused", http.StatusConflict, "Payload already submitted under another key",
		"The same request was submitted a moment ago under another idempotency key, as a double click that mints a key per click does. Retry with the first key to get its outcome; send a new key only for a request that is meant to run again."},
	KindDuplicate: {"duplicate", http.StatusConflict, "Duplicate request",
		"The same request was already submitted inside the duplicate-protection window. If it is meant to run again, send it after the Retry-After delay."},
	KindTokenMissing: {"token-missing", http.StatusBadRequest, "Token missing",
		"The request needs a one-time token and had none. Get a token from the issuing endpoint and send it with the request."},
	KindTokenInvalid: {"token-invalid", http.StatusBadRequest, "Token invalid",
		"The one-time token is malformed, unknown, expired, or was issued to another caller. Get a new token."},
	KindTokenUsed: {"token-used", http.StatusConflict, "Token already used",
		"The one-time token was already spent and its outcome was not stored. No retry with it can succeed: get a new token if the request is meant to run again."},
	KindBodyTooLarge: {"body-too-large", http.StatusRequestEntityTooLarge, "Request body too large",
		"The request body is over the size this endpoint reads to recognise repeats. Send a smaller body."},
	KindBodyUnreadable: {"body-unreadable", http.StatusBadRequest, "Request body unreadable",
		"The request body could not be read to the end. Send the request again."},
	KindUnauthenticated: {"unauthenticated", http.StatusUnauthorized, "Unauthenticated",
		"The caller of the request could not be identified, and duplicate protection is kept per caller. Authenticate and send the request again."},
	KindResponseNotStored: {"response-not-stored", http.StatusInternalServerError, "Response not stored",
		"The first request with this key or token was processed, but its response was too large or streamed, so it could not be kept for replay. The request is not processed again; its outcome must be looked up another way. A retry gets this answer again."},
	KindOutcomeUnknown: {"outcome-unknown", http.StatusInternalServerError, "Outcome unknown",
		"The first request with this key or token may have been processed, but the server could not learn its outcome (a service behind it timed out or broke off its answer). The request is not processed again, so that it cannot run twice; its outcome must be looked up another way. A retry gets this answer again."},
	KindUnavailable: {"unavailable", http.StatusServiceUnavailable, "Service unavailable",
		"Duplicate protection is unavailable for a moment, so the request was not processed. Retry with the same key or token after the Retry-After delay."},
	KindInternal: {"internal", http.StatusInternalServerError, "Internal error",
		"The request could not be processed because of an unexpected server error."},
}

// Type returns the description of kind k.
func (k Kind) Type() *ProblemType { return &types[k] }

// Types returns a new slice describing every problem type, in a stable
// order (the order of the kinds).
func Types() []ProblemType {
	return append([]ProblemType(nil), types[:]...)
}

// Details the adapters share, for the problems they answer alike.
const (
	DetailUnauthenticated = "the caller of this request could not be identified"
	DetailKeyMismatch     = "this idempotency key was already used with a different request payload"
	DetailInProgress      = "a request with this key is still being processed; retry after the delay given"
	DetailUnavailable     = "duplicate protection is unavailable; the request was not processed"
	DetailInternal        = "the request could not be processed"
)

// DetailKeyMissing is the detail of a key-missing problem for the key
// header header.
func DetailKeyMissing(header string) string {
	return "this request requires an " + header + " header"
}

// UnavailableRetry is the Retry-After sent with 503 when the store fails.
const UnavailableRetry = time.Second

// RetrySeconds formats d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func RetrySeconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(s), 1), 10)
}

// Members selects the optional members of problem documents.
type Members uint8

// Optional problem members.
const (
	// MemberInstance adds "instance": a per-response identifier (a
	// urn:uuid by default).
	MemberInstance Members = 1 << iota
	// MemberRetryable adds "retryable": true exactly when the response
	// carries Retry-After.
	MemberRetryable
	// MemberIdempotencyKey adds "idempotency_key": the client's own key,
	// back to the same client.
	MemberIdempotencyKey

	// DefaultMembers holds every optional member.
	DefaultMembers = MemberInstance | MemberRetryable | MemberIdempotencyKey
)

// UUIDInstance returns a fresh random URN, urn:uuid:<version 4 UUID>: the
// default problem instance.
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
