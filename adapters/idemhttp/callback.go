package idemhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// DefaultCallbackRetention is how long Callback keeps a handled callback's
// record when no retention is given: providers retry for up to three days
// (Stripe) and some replay older events by hand, so a week.
const DefaultCallbackRetention = 7 * 24 * time.Hour

// Callback makes Idempotency serve provider callbacks (webhooks): the
// sender retries a notification until it gets a 2xx, concurrently and out
// of order, and must never be told to retry one that was handled.
//
//   - Only 2xx responses are stored: a duplicate of a handled callback gets
//     the first 2xx response, marked replayed; any other response releases
//     the key, so the provider's retry runs the handler again. A 2xx
//     response over WithMaxStoredResponse, or streamed, is stored as its
//     status and replayed headers without the body (nor its
//     Content-Encoding): its duplicates still get that 2xx.
//   - A duplicate that arrives while the first is still being handled waits
//     for its response (WithWait(0)), within the request's context.
//   - Records are kept for retention (0 means DefaultCallbackRetention).
//   - The body is not part of the fingerprint unless WithInclude or
//     WithVolatile says which members are (nor are query parameters,
//     unless WithQueryParams names them): a retry that changed a send time
//     is the same event. With WithInclude, a callback whose named members
//     differ from the first one's gets 422.
//   - A callback without its key, or with a malformed one, gets 400 with a
//     problem body; give the key's place with WithKeyFrom.
//
// It cannot be combined with WithStorePolicy or WithOptionalKey, which
// would undo it, and cannot be given twice. Engine options given with
// WithEngineOptions apply after Callback's. Idempotency only.
func Callback(retention time.Duration) Option {
	return func(c *config) error {
		if err := c.only("Callback", modeKey); err != nil {
			return err
		}
		if retention < 0 {
			return fmt.Errorf("Callback(%v): negative retention", retention)
		}
		if c.callback {
			return errors.New("Callback: given twice")
		}
		if retention == 0 {
			retention = DefaultCallbackRetention
		}
		c.callback = true
		// First, so that the route's own engine options come after.
		c.engineOpts = append([]idemkit.Option{idemkit.WithRetention(retention), idemkit.WithWait(0)}, c.engineOpts...)
		return nil
	}
}

// checkCallback applies the callback profile's settings that depend on
// other options, and refuses those that would undo it.
func (c *config) checkCallback() []error {
	if !c.callback {
		return nil
	}
	var errs []error
	if c.storeSet {
		errs = append(errs, errors.New("Callback and WithStorePolicy cannot be combined: a callback stores 2xx responses only"))
	}
	if c.optionalKey {
		errs = append(errs, errors.New("Callback and WithOptionalKey cannot be combined: a callback without its key is refused"))
	}
	c.store = callbackStorePolicy
	if !c.querySet {
		c.query, c.querySet = nil, true
	}
	return errs
}

// callbackStorePolicy stores 2xx responses only.
func callbackStorePolicy(status int) bool { return status >= 200 && status < 300 }

// ErrBadSignature is wrapped, with ErrNoPrincipal, by the errors of a
// SignedPrincipal function for a request whose signature is missing or
// does not match. Its texts never hold the secret or a signature.
var ErrBadSignature = httpcore.ErrBadSignature

// MinSecretLen is the shortest shared secret SignedPrincipal accepts, in
// bytes.
const MinSecretLen = httpcore.MinSecretLen

// Signature describes the common webhook signature scheme for
// SignedPrincipal: the sender puts Prefix and the hex HMAC-SHA256 of the
// raw request body under a shared secret in a header, as in
// "X-Signature: sha256=5d41…". With TimestampHeader set, the sender also
// sends the time of sending, in Unix seconds, in that header, and signs
// the timestamp, '.', and the body; a request sent more than Tolerance
// from now is refused, so a captured callback cannot be replayed later.
type Signature struct {
	// Sender is the principal a request with a valid signature gets:
	// the name of the provider, such as "stripe". Required.
	Sender string
	// Secret is the shared secret, at least MinSecretLen bytes. Required.
	Secret []byte
	// Header is the signature header; "" means "X-Signature".
	Header string
	// Prefix precedes the hex digest; "" means "sha256=". Set it to
	// "-" for a bare digest.
	Prefix string
	// TimestampHeader, when set, is the header holding the signed time
	// of sending, in Unix seconds.
	TimestampHeader string
	// Tolerance is how far the timestamp may lie from now: required
	// with TimestampHeader, refused without.
	Tolerance time.Duration
	// MaxBody is the largest body read to check the signature; "0"
	// means DefaultMaxBody. Keep it at WithMaxBody's value: a larger
	// body is refused as unsigned.
	MaxBody int64
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// SignedPrincipal returns a principal function (for WithPrincipal) that
// reads the request body (at most s.MaxBody bytes, given back to the
// request afterwards), checks its signature as s says, and returns
// s.Sender when it matches. Digests are compared in constant time. For a
// missing, malformed or wrong signature, a timestamp out of tolerance or
// a body over the cap it returns an error wrapping ErrNoPrincipal and
// ErrBadSignature (answered 401): the handler does not run and no record
// is created, claimed or read, so a forged callback carrying a genuine
// transaction number cannot block, poison or read the genuine one's.
//
// It returns an error wrapping idemkit.ErrInvalid for an empty sender, a
// short secret, a bad header name, or a tolerance without a timestamp
// header or the other way round.
func SignedPrincipal(s Signature) (func(*http.Request) (string, error), error) {
	if s.MaxBody == 0 {
		s.MaxBody = DefaultMaxBody
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	v, err := httpcore.SignatureScheme{Sender: s.Sender, Secret: s.Secret, Header: s.Header, Prefix: s.Prefix,
		TimestampHeader: s.TimestampHeader, Tolerance: s.Tolerance}.Compile()
	if s.MaxBody < 0 {
		err = errors.Join(err, fmt.Errorf("negative MaxBody %d", s.MaxBody))
	}
	if err != nil {
		return nil, fmt.Errorf("idemhttp: SignedPrincipal: %w: %w", idemkit.ErrInvalid, err)
	}
	return func(r *http.Request) (string, error) {
		body, err := readSigned(r, s.MaxBody)
		if err != nil {
			return "", fmt.Errorf("%w: %w: %w", ErrNoPrincipal, ErrBadSignature, err)
		}
		var ts []string
		if v.TimestampHeader != "" {
			ts = r.Header[v.TimestampHeader]
		}
		p, err := v.Verify(r.Header[v.Header], ts, body, s.Now())
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoPrincipal, err)
		}
		return p, nil
	}, nil
}

// errSignedTooLarge reports a body over Signature.MaxBody.
var errSignedTooLarge = errors.New("the body is over the signature check's cap")

// readSigned reads r's body, at most limit bytes, and gives it back to r.
func readSigned(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errSignedTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	_ = r.Body.Close()
	if err != nil {
		return nil, errors.New("the body could not be read")
	}
	if int64(len(b)) > limit {
		return nil, errSignedTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}
