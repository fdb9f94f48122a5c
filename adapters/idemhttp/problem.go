package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ProblemBase is the prefix of every problem type URI this package uses.
// The URIs are stable identifiers; they are not promised to resolve.
const ProblemBase = "https://idemkit.dev/problems/"

// Problem type URIs, one per error. The status each is sent with is given
// in the comment.
const (
	ProblemKeyMissing      = ProblemBase + "key-missing"     // 400: no idempotency key
	ProblemKeyInvalid      = ProblemBase + "key-invalid"     // 400: malformed key
	ProblemInProgress      = ProblemBase + "in-progress"     // 409: first request still running; Retry-After
	ProblemKeyMismatch     = ProblemBase + "key-mismatch"    // 422: key reused with another payload
	ProblemDuplicate       = ProblemBase + "duplicate"       // 409: repeat inside a window; Retry-After
	ProblemTokenMissing    = ProblemBase + "token-missing"   // 400: no token
	ProblemTokenInvalid    = ProblemBase + "token-invalid"   // 400: unknown, expired, forged or other principal's token
	ProblemTokenUsed       = ProblemBase + "token-used"      // 409: token already used, no stored outcome; no Retry-After (a retry cannot succeed)
	ProblemBodyTooLarge    = ProblemBase + "body-too-large"  // 413: request body over the fingerprint cap
	ProblemBodyUnreadable  = ProblemBase + "body-unreadable" // 400: request body could not be read
	ProblemUnauthenticated = ProblemBase + "unauthenticated" // 401: the principal function failed
	ProblemUnavailable     = ProblemBase + "unavailable"     // 503: store down (fail-closed); Retry-After
	ProblemInternal        = ProblemBase + "internal"        // 500: unexpected engine error
)

// ProblemContentType is the media type of every error this package writes.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object, as written by the
// middleware for every error it answers itself. Clients can decode error
// bodies into it and switch on Type.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// unavailableRetry is the Retry-After sent with 503 when the store fails.
const unavailableRetry = time.Second

var titles = map[string]string{
	ProblemKeyMissing:      "Idempotency key missing",
	ProblemKeyInvalid:      "Idempotency key invalid",
	ProblemInProgress:      "Request in progress",
	ProblemKeyMismatch:     "Idempotency key reused with a different payload",
	ProblemDuplicate:       "Duplicate request",
	ProblemTokenMissing:    "Token missing",
	ProblemTokenInvalid:    "Token invalid",
	ProblemTokenUsed:       "Token already used",
	ProblemBodyTooLarge:    "Request body too large",
	ProblemBodyUnreadable:  "Request body unreadable",
	ProblemUnauthenticated: "Unauthenticated",
	ProblemUnavailable:     "Service unavailable",
	ProblemInternal:        "Internal error",
}

// writeProblem answers with an application/problem+json body. retry > 0
// adds a Retry-After header in whole seconds, rounded up.
func writeProblem(w http.ResponseWriter, status int, typ, detail string, retry time.Duration) {
	body, err := json.Marshal(Problem{Type: typ, Title: titles[typ], Status: status, Detail: detail})
	if err != nil { // cannot happen for these field types
		body = []byte(`{"type":"` + ProblemInternal + `"}`)
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del(ReplayedHeader)
	if retry > 0 {
		h.Set("Retry-After", retrySeconds(retry))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// retrySeconds formats d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func retrySeconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(s), 1), 10)
}
