package idemfiber

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// KeySource says where the middleware reads a request's key from, for
// WithKeyFrom: a header (KeyFromHeader), a query parameter (KeyFromQuery),
// a member of a JSON body (KeyFromJSON) or a function (KeyFromFunc). A key
// read from anywhere obeys the header key's rules (keying.CheckKey).
type KeySource struct {
	what   string // for problem details and errors: never a value
	header string
	query  string
	path   *keying.KeyPath
	fn     func(fiber.Ctx) (string, error)
	err    error
}

// KeyFromHeader reads the key from the request header name (a bare token
// or an sf-string, as the key header), as providers send delivery ids.
func KeyFromHeader(name string) KeySource {
	if !httpcore.ValidToken(name) {
		return KeySource{err: fmt.Errorf("KeyFromHeader: invalid header name %q", name)}
	}
	return KeySource{what: "header " + name, header: name}
}

// KeyFromQuery reads the key from the query parameter name, sent once.
func KeyFromQuery(name string) KeySource {
	if name == "" {
		return KeySource{err: errors.New("KeyFromQuery: empty parameter name")}
	}
	return KeySource{what: "query parameter " + name, query: name}
}

// KeyFromJSON reads the key from the member of a JSON body that path
// names, written as for keying.NewKeyPath ("id", "data.object.id"): a
// string or a number. A body that is not a single valid JSON value, holds
// a member name twice, or has no string or number at path is answered
// 400. Fiber's BodyLimit bounds the body.
func KeyFromJSON(path string) KeySource {
	k, err := keying.NewKeyPath(path)
	if err != nil {
		return KeySource{err: fmt.Errorf("KeyFromJSON: %w", err)}
	}
	return KeySource{what: "body member " + path, path: k}
}

// KeyFromFunc reads the key with fn: "" and nil for a request without a
// key, an error for one whose key cannot be read (both answered 400, the
// error's text not sent). The key may alias the request's memory: the
// middleware copies what it keeps.
func KeyFromFunc(fn func(c fiber.Ctx) (string, error)) KeySource {
	if fn == nil {
		return KeySource{err: errors.New("KeyFromFunc: nil function")}
	}
	return KeySource{what: "the route's key function", fn: fn}
}

// WithKeyFrom reads the idempotency key from src instead of the key
// header, for senders that name their requests themselves, such as a
// payment provider's transaction number in a callback's body. A request
// without the key gets 400 key-missing (or passes with WithOptionalKey),
// one with a malformed key 400 key-invalid. It cannot be given twice or
// with WithKeyHeader. Scope a key from the body with a principal that
// authenticates the sender (SignedPrincipal).
func WithKeyFrom(src KeySource) Option {
	return func(c *config) error {
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

// read returns the key src names in c's request, and whether there is one.
func (s *KeySource) read(c fiber.Ctx) (key string, present bool, err error) {
	switch {
	case s.header != "":
		k, present, err := httpcore.HeaderKey(c.Request().Header.PeekAll(s.header))
		return string(k), present, err
	case s.query != "":
		vs := c.Request().URI().QueryArgs().PeekMulti(s.query)
		switch len(vs) {
		case 0:
			return "", false, nil
		case 1:
			return string(vs[0]), true, keying.CheckKey(string(vs[0]))
		}
		return "", true, fmt.Errorf("%w: the parameter is repeated", keying.ErrMalformedKey)
	case s.path != nil:
		k, perr := s.path.Extract(c.BodyRaw())
		if errors.Is(perr, keying.ErrKeyAbsent) {
			return "", false, nil
		}
		return k, true, perr
	}
	k, ferr := s.fn(c)
	switch {
	case ferr != nil:
		return "", true, errors.New("the key function refused the request")
	case k == "":
		return "", false, nil
	}
	return string([]byte(k)), true, keying.CheckKey(k)
}

// WithInclude makes the body fingerprint cover only the named members of
// a JSON body (keying.WithInclude): a retry whose other members changed is
// the same request, one whose named members changed gets 422.
func WithInclude(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error {
		if len(paths) == 0 {
			return errors.New("WithInclude: no paths")
		}
		c.include = append(c.include, paths...)
		return nil
	}
}

// DefaultCallbackRetention is how long Callback keeps a handled
// callback's record when no retention is given: a week.
const DefaultCallbackRetention = 7 * 24 * time.Hour

// Callback makes the middleware serve provider callbacks (webhooks), as
// idemhttp.Callback does: only 2xx responses are stored, so a duplicate
// of a handled callback gets the first 2xx response and any other
// response releases the key for the provider's retry (a 2xx response
// over WithMaxStoredResponse, or streamed, is kept as its status and
// headers without the body); a duplicate in
// flight waits for the first one's response; records are kept for
// retention (0 means DefaultCallbackRetention); the body and query are
// not part of the fingerprint unless WithInclude or WithVolatile name
// members; a missing or malformed key gets 400. It cannot be combined
// with WithStorePolicy or WithOptionalKey, nor given twice.
func Callback(retention time.Duration) Option {
	return func(c *config) error {
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
		c.engineOpts = append([]idemkit.Option{idemkit.WithRetention(retention), idemkit.WithWait(0)}, c.engineOpts...)
		return nil
	}
}

// checkCallback refuses options that would undo Callback.
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
	c.storePolicy = func(status int) bool { return status >= 200 && status < 300 }
	return errs
}

// ErrBadSignature is wrapped by the errors of a SignedPrincipal function
// for a request whose signature is missing or does not match.
var ErrBadSignature = httpcore.ErrBadSignature

// Signature describes the common webhook signature scheme for
// SignedPrincipal, as idemhttp.Signature does: Prefix and the hex
// HMAC-SHA256 of the raw body (or of the timestamp header's value, '.',
// and the body) under Secret, in Header.
type Signature struct {
	Sender          string        // the principal of a signed request; required
	Secret          []byte        // at least 16 bytes; required
	Header          string        // "" means "X-Signature"
	Prefix          string        // "" means "sha256="; "-" means none
	TimestampHeader string        // the signed time of sending, Unix seconds; optional
	Tolerance       time.Duration // how far the timestamp may lie from now; with TimestampHeader only
	Now             func() time.Time
}

// SignedPrincipal returns a PrincipalFunc that checks the signature of
// the request body as s says and returns s.Sender when it matches,
// comparing digests in constant time. Any other request gets 401 before
// the engine is called, so a forged callback cannot create, block or read
// the record of the genuine one. It returns an error wrapping
// idemkit.ErrInvalid for an empty sender, a short secret, a bad header
// name, or a tolerance without a timestamp header or the other way round.
func SignedPrincipal(s Signature) (PrincipalFunc, error) {
	v, err := httpcore.SignatureScheme{Sender: s.Sender, Secret: s.Secret, Header: s.Header, Prefix: s.Prefix,
		TimestampHeader: s.TimestampHeader, Tolerance: s.Tolerance}.Compile()
	if err != nil {
		return nil, fmt.Errorf("idemfiber: SignedPrincipal: %w: %w", idemkit.ErrInvalid, err)
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	return func(c fiber.Ctx) (string, error) {
		h := &c.Request().Header
		var ts []string
		if v.TimestampHeader != "" {
			ts = values(h.PeekAll(v.TimestampHeader))
		}
		return v.Verify(values(h.PeekAll(v.Header)), ts, c.BodyRaw(), now())
	}, nil
}

// values copies header values out of fasthttp's memory.
func values(vs [][]byte) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
