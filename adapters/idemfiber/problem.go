package idemfiber

import (
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/valyala/fasthttp"
)

// DefaultProblemBase is the prefix of every problem type URI, the same as
// idemhttp's, so clients handle both adapters alike.
const DefaultProblemBase = httpcore.DefaultProblemBase

// Problem type URIs, the same as idemhttp's; the status each is sent with
// is in the comment.
const (
	ProblemKeyMissing      = httpcore.ProblemKeyMissing      // 400: no idempotency key
	ProblemKeyInvalid      = httpcore.ProblemKeyInvalid      // 400: malformed or repeated key
	ProblemInProgress      = httpcore.ProblemInProgress      // 409: first request still running; Retry-After
	ProblemKeyMismatch     = httpcore.ProblemKeyMismatch     // 422: key reused with another payload
	ProblemUnauthenticated = httpcore.ProblemUnauthenticated // 401: the principal function failed
	ProblemUnavailable     = httpcore.ProblemUnavailable     // 503: store down (fail-closed); Retry-After
	ProblemInternal        = httpcore.ProblemInternal        // 500: unexpected engine outcome
	// ProblemResponseNotStored (500) answers a repeat of a request whose
	// response was too large to keep: it ran once and does not run again.
	ProblemResponseNotStored = httpcore.ProblemResponseNotStored
)

// ProblemContentType is the media type of every error the middleware
// answers itself.
const ProblemContentType = httpcore.ProblemContentType

// Problem is an RFC 9457 problem details object as the middleware writes
// it, the same type as idemhttp's. Clients can decode error bodies into
// it and switch on Type. The middleware leaves the optional members
// (instance, retryable, idempotency_key) out.
type Problem = httpcore.Problem

// Header names, the same as every idemkit adapter's.
const (
	// DefaultKeyHeader is the request header carrying the key unless
	// WithKeyHeader names another.
	DefaultKeyHeader = httpcore.DefaultKeyHeader
	// ReplayedHeader is set to "true" on a replayed response, never on a
	// fresh one.
	ReplayedHeader = httpcore.ReplayedHeader
)

// problemTypes are the type URIs, by kind.
var problemTypes = func() (t [httpcore.NumKinds]string) {
	for k, pt := range httpcore.Types() {
		t[k] = DefaultProblemBase + pt.Name
	}
	return t
}()

// writeProblem answers with a problem+json body. Headers that earlier
// middleware set (CORS, request ids) stay. retry > 0 adds Retry-After in
// whole seconds, rounded up.
func writeProblem(c fiber.Ctx, k httpcore.Kind, detail string, retry time.Duration) error {
	setProblem(c.Response(), k, detail, retry)
	return nil
}

// setProblem makes resp a problem+json answer.
func setProblem(resp *fasthttp.Response, k httpcore.Kind, detail string, retry time.Duration) {
	t := k.Type()
	doc := Problem{Type: problemTypes[k], Title: t.Title, Status: t.Status, Detail: detail}
	resp.Header.Del(ReplayedHeader)
	resp.SetStatusCode(t.Status)
	resp.Header.SetContentType(ProblemContentType)
	resp.Header.Set("Cache-Control", "no-store")
	if retry > 0 {
		resp.Header.Set("Retry-After", httpcore.RetrySeconds(retry))
	}
	resp.SetBody(doc.JSON())
}

// replayProblem answers with the problem a terminal record stands for,
// marked replayed.
func replayProblem(c fiber.Ctx, k httpcore.Kind, detail string) error {
	setProblem(c.Response(), k, detail, 0)
	c.Response().Header.SetCanonical(replayedName, replayedTrue)
	return nil
}
