package delivery

import (
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/keying"
)

// BodyKey returns a function that reads a message key from the member of
// a JSON body that path names (keying.NewKeyPath): a string or a number.
// Its errors name the path, never the value; a body without the member,
// with a non-scalar there, or that is not one valid JSON value has no key.
func BodyKey(path string) (func(body []byte) (string, error), error) {
	k, err := keying.NewKeyPath(path)
	if err != nil {
		return nil, err
	}
	return k.Extract, nil
}

// Payload is the body paths that decide whether two messages with one key
// are the same message: the members that must match (Include; none means
// the whole body) and those ignored (Volatile).
type Payload struct {
	Include, Volatile []string
}

// Set reports whether any path was given.
func (p Payload) Set() bool { return len(p.Include) > 0 || len(p.Volatile) > 0 }

// Fingerprint returns the fingerprint function of p: a JSON body's
// canonical form, restricted to the included members and without the
// volatile ones, hashed (keying.Fingerprinter); any other body hashed
// whole.
func (p Payload) Fingerprint() (func(body []byte) string, error) {
	opts := []keying.Option{keying.WithVolatile(p.Volatile...)}
	if len(p.Include) > 0 {
		opts = append(opts, keying.WithInclude(p.Include...))
	}
	f, err := keying.NewFingerprinter(opts...)
	if err != nil {
		return nil, err
	}
	return func(body []byte) string { return f.Sum("", "", nil, body) }, nil
}

// ErrPayloadAndFingerprint is returned when payload paths and a
// fingerprint function are both given: the function would ignore them.
var ErrPayloadAndFingerprint = errors.New("WithInclude and WithVolatile cannot be combined with WithFingerprint: the function would ignore the paths")

// AddInclude adds the members that must match (the queue adapters'
// WithInclude), refusing none and a malformed path.
func (p *Payload) AddInclude(paths []string) error {
	return p.add("WithInclude", &p.Include, Payload{Include: paths})
}

// AddVolatile adds the members left out (the queue adapters'
// WithVolatile), refusing none and a malformed path.
func (p *Payload) AddVolatile(paths []string) error {
	return p.add("WithVolatile", &p.Volatile, Payload{Volatile: paths})
}

// add checks the paths of only, which holds them alone, and appends them
// to dst; errors are prefixed with option.
func (p *Payload) add(option string, dst *[]string, only Payload) error {
	paths := append(only.Include, only.Volatile...)
	if len(paths) == 0 {
		return errors.New(option + ": no paths")
	}
	if _, err := only.Fingerprint(); err != nil {
		return fmt.Errorf("%s: %w", option, err)
	}
	*dst = append(*dst, paths...)
	return nil
}
