package idemhttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// KeySource says where Idempotency reads a request's key from, for
// WithKeyFrom: a header (KeyFromHeader), a query parameter (KeyFromQuery),
// a member of a JSON body (KeyFromJSON) or a function (KeyFromFunc). A key
// read from anywhere obeys the header key's rules (keying.CheckKey): 1 to
// MaxKeyLen bytes of printable ASCII.
type KeySource struct {
	what   string // for problem details and errors: never a value
	header string
	query  string
	path   *keying.KeyPath
	fn     func(*http.Request, []byte) (string, error)
	err    error
}

// KeyFromHeader reads the key from the request header name, parsed as the
// idempotency key header is (a bare token or an sf-string), as providers
// send delivery ids (X-GitHub-Delivery).
func KeyFromHeader(name string) KeySource {
	if !httpcore.ValidToken(name) {
		return KeySource{err: fmt.Errorf("KeyFromHeader: invalid header name %q", name)}
	}
	name = http.CanonicalHeaderKey(name)
	return KeySource{what: "header " + name, header: name}
}

// KeyFromQuery reads the key from the query parameter name, which must be
// sent once.
func KeyFromQuery(name string) KeySource {
	if name == "" {
		return KeySource{err: errors.New("KeyFromQuery: empty parameter name")}
	}
	return KeySource{what: "query parameter " + name, query: name}
}

// KeyFromJSON reads the key from the member of a JSON body that path
// names, written as for keying.NewKeyPath ("id", "data.object.id"): a
// string or a number. The body is read whole, at most WithMaxBody bytes,
// before the key; a body that is not a single valid JSON value, holds a
// member name twice, or has no string or number at path is answered 400.
func KeyFromJSON(path string) KeySource {
	k, err := keying.NewKeyPath(path)
	if err != nil {
		return KeySource{err: fmt.Errorf("KeyFromJSON: %w", err)}
	}
	return KeySource{what: "body member " + path, path: k}
}

// KeyFromFunc reads the key with fn, given the request and its body (at
// most WithMaxBody bytes, which fn must not keep or modify). fn returns ""
// and nil for a request without a key, and an error for one whose key
// cannot be read: both are answered 400, the error's text not sent. fn
// must be safe for concurrent use.
func KeyFromFunc(fn func(r *http.Request, body []byte) (string, error)) KeySource {
	if fn == nil {
		return KeySource{err: errors.New("KeyFromFunc: nil function")}
	}
	return KeySource{what: "the route's key function", fn: fn}
}

// WithKeyFrom reads the idempotency key from src instead of the key
// header, for senders that put their own identity of a request elsewhere,
// such as a payment provider's transaction number in a callback's body.
// Everything else is as with the header: the first request with a key runs
// the handler, a retry gets its stored response, a concurrent one 409 or,
// with WithWait, the first one's response. A request without the key is
// answered 400 ProblemKeyMissing (or passed through with WithOptionalKey),
// one with a malformed key 400 ProblemKeyInvalid. It cannot be given twice
// or with WithKeyHeader. Idempotency only.
//
// A key read from the body is the sender's word: scope it with a principal
// that authenticates the sender (SignedPrincipal, mTLS), or anyone who
// learns a transaction number can claim it.
func WithKeyFrom(src KeySource) Option {
	return func(c *config) error {
		if err := c.only("WithKeyFrom", modeKey); err != nil {
			return err
		}
		if src.err != nil {
			return fmt.Errorf("WithKeyFrom: %w", src.err)
		}
		if src.what == "" {
			return errors.New("WithKeyFrom: zero KeySource: use KeyFromHeader, KeyFromQuery, KeyFromJSON or KeyFromFunc")
		}
		if c.keyFrom != nil {
			return errors.New("WithKeyFrom: given twice")
		}
		c.keyFrom = &src
		return nil
	}
}

// fromBody reports whether the key is read after the body.
func (s *KeySource) fromBody() bool { return s.path != nil || s.fn != nil }

// read returns the key src names in r (and body, for a body source), and
// whether the request carries one.
func (s *KeySource) read(r *http.Request, body []byte) (key string, present bool, err error) {
	switch {
	case s.header != "":
		return httpcore.HeaderKey(r.Header[s.header])
	case s.query != "":
		vs, ok := r.URL.Query()[s.query]
		switch {
		case !ok:
			return "", false, nil
		case len(vs) != 1:
			return "", true, fmt.Errorf("%w: the parameter is repeated", keying.ErrMalformedKey)
		}
		return vs[0], true, keying.CheckKey(vs[0])
	case s.path != nil:
		k, perr := s.path.Extract(body)
		if errors.Is(perr, keying.ErrKeyAbsent) {
			return "", false, nil
		}
		return k, true, perr
	}
	k, ferr := s.fn(r, body)
	switch {
	case ferr != nil:
		return "", true, errKeyFunc
	case k == "":
		return "", false, nil
	}
	return k, true, keying.CheckKey(k)
}

// errKeyFunc stands for a key function's error, whose text is not sent.
var errKeyFunc = errors.New("the key function refused the request")
