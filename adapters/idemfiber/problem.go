package idemfiber

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit/keying"
	"github.com/valyala/fasthttp"
)

// ProblemBase is the prefix of every problem type URI, the same as
// idemhttp's, so clients handle both adapters alike.
const ProblemBase = "https://idemkit.dev/problems/"

// Problem type URIs; the status each is sent with is in the comment.
const (
	ProblemKeyMissing      = ProblemBase + "key-missing"     // 400: no idempotency key
	ProblemKeyInvalid      = ProblemBase + "key-invalid"     // 400: malformed or repeated key
	ProblemInProgress      = ProblemBase + "in-progress"     // 409: first request still running; Retry-After
	ProblemKeyMismatch     = ProblemBase + "key-mismatch"    // 422: key reused with another payload
	ProblemUnauthenticated = ProblemBase + "unauthenticated" // 401: the principal function failed
	ProblemUnavailable     = ProblemBase + "unavailable"     // 503: store down (fail-closed); Retry-After
	ProblemInternal        = ProblemBase + "internal"        // 500: unexpected engine outcome
	// ProblemResponseNotStored (500) answers a repeat of a request whose
	// response was too large to keep: it ran once and does not run again.
	ProblemResponseNotStored = ProblemBase + "response-not-stored"
)

// ProblemContentType is the media type of every error the middleware
// answers itself.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object as the middleware writes
// it. Clients can decode error bodies into it and switch on Type.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

var titles = map[string]string{
	ProblemKeyMissing:        "Idempotency key missing",
	ProblemKeyInvalid:        "Idempotency key invalid",
	ProblemInProgress:        "Request in progress",
	ProblemKeyMismatch:       "Idempotency key reused with a different payload",
	ProblemUnauthenticated:   "Unauthenticated",
	ProblemUnavailable:       "Service unavailable",
	ProblemInternal:          "Internal error",
	ProblemResponseNotStored: "Response not stored",
}

// notStoredDetail is the detail of ProblemResponseNotStored.
const notStoredDetail = "the first request with this key was processed, but its response was too large to keep; it is not processed again"

// notStored is the record a key keeps for a response over the stored-size
// cap: the problem every repeat gets, replayed.
var notStored = func() []byte {
	var resp fasthttp.Response
	setProblem(&resp, http.StatusInternalServerError, ProblemResponseNotStored, notStoredDetail, 0)
	return encodeResponse(&resp, []string{fasthttp.HeaderContentType, fasthttp.HeaderCacheControl})
}()

// unavailableRetry is the Retry-After sent with 503.
const unavailableRetry = time.Second

// writeProblem answers with a problem+json body. Headers that earlier
// middleware set (CORS, request ids) stay. retry > 0 adds Retry-After in
// whole seconds, rounded up.
func writeProblem(c fiber.Ctx, status int, typ, detail string, retry time.Duration) error {
	setProblem(c.Response(), status, typ, detail, retry)
	return nil
}

// setProblem makes resp a problem+json answer.
func setProblem(resp *fasthttp.Response, status int, typ, detail string, retry time.Duration) {
	body, err := json.Marshal(Problem{Type: typ, Title: titles[typ], Status: status, Detail: detail})
	if err != nil { // cannot happen for these field types
		body = []byte(`{"type":"` + ProblemInternal + `"}`)
	}
	resp.Header.Del(ReplayedHeader)
	resp.SetStatusCode(status)
	resp.Header.SetContentType(ProblemContentType)
	resp.Header.Set("Cache-Control", "no-store")
	if retry > 0 {
		resp.Header.Set("Retry-After", retrySeconds(retry))
	}
	resp.SetBody(body)
}

// retrySeconds formats d as whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(s), 1), 10)
}

// Header names, the same as every idemkit adapter's.
const (
	// KeyHeader is the default request header carrying the key.
	KeyHeader = keying.KeyHeader
	// ReplayedHeader is set to "true" on a replayed response, never on a
	// fresh one.
	ReplayedHeader = keying.ReplayedHeader
)

const replayedHeader = ReplayedHeader
