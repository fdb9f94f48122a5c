package idemecho

import (
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/adapters/internal/netcore"
)

// Header names and limits, the same as every idemkit adapter's.
const (
	// DefaultKeyHeader is the request header carrying the idempotency key
	// unless WithKeyHeader names another.
	DefaultKeyHeader = httpcore.DefaultKeyHeader
	// DefaultTokenHeader is the request header carrying a one-time token
	// unless WithTokenHeader names another.
	DefaultTokenHeader = httpcore.DefaultTokenHeader
	// ReplayedHeader is "true" on every replayed response, never on a
	// fresh one.
	ReplayedHeader = httpcore.ReplayedHeader
	// DefaultMaxStoredResponse is the largest response body, in bytes,
	// stored unless WithMaxStoredResponse says otherwise.
	DefaultMaxStoredResponse = httpcore.DefaultMaxStoredResponse
	// DefaultMaxBody is the largest request body, in bytes, read for a
	// fingerprint unless WithMaxBody says otherwise.
	DefaultMaxBody = netcore.DefaultMaxBody
)

// DefaultStorePolicy stores 2xx and 4xx responses except 408, 409, 425
// and 429, which a retry may turn into another outcome.
func DefaultStorePolicy(status int) bool { return httpcore.DefaultStorePolicy(status) }

// Problem is an RFC 9457 problem details object as the middleware writes
// it, the same type as idemhttp's and idemfiber's: clients decode error
// bodies into it and switch on Type. The middleware leaves the optional
// members (instance, retryable, idempotency_key) out.
type Problem = httpcore.Problem

// DefaultProblemBase is the prefix of every problem type URI unless
// WithProblemBase names another.
const DefaultProblemBase = httpcore.DefaultProblemBase

// ProblemContentType is the media type of every error the middleware
// answers itself.
const ProblemContentType = httpcore.ProblemContentType

// Problem type URIs, the same as idemhttp's; the status each is sent with
// is in the comment.
const (
	ProblemKeyMissing        = httpcore.ProblemKeyMissing        // 400: no idempotency key
	ProblemKeyInvalid        = httpcore.ProblemKeyInvalid        // 400: malformed or repeated key
	ProblemTokenMissing      = httpcore.ProblemTokenMissing      // 400: no token
	ProblemTokenInvalid      = httpcore.ProblemTokenInvalid      // 400: unknown, expired or other principal's token
	ProblemBodyUnreadable    = httpcore.ProblemBodyUnreadable    // 400: request body could not be read
	ProblemUnauthenticated   = httpcore.ProblemUnauthenticated   // 401: the principal function failed
	ProblemInProgress        = httpcore.ProblemInProgress        // 409: first request still running; Retry-After
	ProblemDuplicate         = httpcore.ProblemDuplicate         // 409: Window repeat; Retry-After
	ProblemTokenUsed         = httpcore.ProblemTokenUsed         // 409: token spent, no stored outcome
	ProblemBodyTooLarge      = httpcore.ProblemBodyTooLarge      // 413: request body over WithMaxBody
	ProblemKeyMismatch       = httpcore.ProblemKeyMismatch       // 422: key reused with another payload
	ProblemResponseNotStored = httpcore.ProblemResponseNotStored // 500: replay of a response too large or streamed to keep
	ProblemInternal          = httpcore.ProblemInternal          // 500: unexpected engine outcome
	ProblemUnavailable       = httpcore.ProblemUnavailable       // 503: store down (fail-closed); Retry-After
)
