package keying

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/internal/canonjson"
	"github.com/idemkit/idemkit/store"
)

// Errors returned by KeyPath.Extract for a body that does not carry a key
// where the path says.
var (
	// ErrKeyAbsent reports a JSON body without a value at the key path.
	ErrKeyAbsent = errors.New("keying: no value at the key path")
	// ErrKeyNotScalar reports a value at the key path that is not a
	// string or a number: an object, an array, true, false or null.
	ErrKeyNotScalar = errors.New("keying: the value at the key path is not a string or a number")
)

// KeyPath reads an idempotency key out of a JSON body, such as the event
// or transaction identifier a webhook sender puts in its notification
// ("id", "data.object.id", "resource.out_trade_no"). It is immutable and
// safe for concurrent use.
type KeyPath struct {
	path canonjson.Path
}

// NewKeyPath returns a KeyPath for path, written as for WithVolatile but
// without "[]": a key is one value. It returns an error wrapping
// ErrInvalidPath and store.ErrInvalid when path is malformed or reaches
// into arrays.
func NewKeyPath(path string) (*KeyPath, error) {
	p, err := canonjson.ParsePath(path)
	if err == nil && p.Each() {
		err = fmt.Errorf("%w %q: a key path names one value and cannot hold \"[]\"", ErrInvalidPath, path)
	}
	if err != nil {
		return nil, fmt.Errorf("keying: %w: %w", store.ErrInvalid, err)
	}
	return &KeyPath{path: p}, nil
}

// String returns the path as it was written.
func (k *KeyPath) String() string { return k.path.String() }

// Extract returns the key at k's path in body: a string's text, or a
// number in its canonical form (see Canonicalize: 1.0 and 1 are one key).
// The key must be 1 to MaxKeyLen bytes of printable ASCII, as a header
// key. body is parsed whole, and only a single valid JSON value is read:
// Extract returns an error wrapping ErrNotJSON or ErrDuplicateName (a
// member named twice could be read differently by the application),
// ErrKeyAbsent, ErrKeyNotScalar or ErrMalformedKey. Its error texts name
// the path, never the value.
func (k *KeyPath) Extract(body []byte) (string, error) {
	p := canonjson.GetParser()
	canon, err := p.Append(p.Buf[:0], body, nil)
	if err != nil {
		canonjson.PutParser(p)
		return "", err
	}
	p.Buf = canon
	key, err := k.scalar(canon)
	canonjson.PutParser(p)
	if err != nil {
		return "", fmt.Errorf("key path %q: %w", k.path.String(), err)
	}
	return key, nil
}

// scalar returns the key at k's path in canon, a canonical document.
func (k *KeyPath) scalar(canon []byte) (string, error) {
	v, ok := canonjson.Lookup(canon, k.path)
	if !ok {
		return "", ErrKeyAbsent
	}
	var key string
	switch c := v[0]; {
	case c == '"':
		if err := json.Unmarshal(v, &key); err != nil { // canonical, so valid
			return "", fmt.Errorf("%w: %w", ErrNotJSON, err)
		}
	case c == '-' || '0' <= c && c <= '9':
		key = string(v)
	default:
		return "", ErrKeyNotScalar
	}
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// CheckKey returns nil when key obeys the rules every idempotency key
// obeys, wherever it was read from (a header, a query parameter, a body,
// a function): 1 to MaxKeyLen bytes of printable ASCII. Otherwise it
// returns an error wrapping ErrMalformedKey that does not hold the key.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrMalformedKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d characters, at most %d", ErrMalformedKey, len(key), MaxKeyLen)
	}
	return checkPrintable(key)
}
