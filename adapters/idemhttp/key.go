package idemhttp

import (
	"fmt"

	"github.com/idemkit/idemkit/keying"
)

// errBadKey is wrapped by every key parsing error; its texts never quote
// the key.
var errBadKey = keying.ErrMalformedKey

// headerKey returns the single value of a key or token header, parsed
// with keying.ParseKeyHeader. present reports whether the header was sent
// at all.
func headerKey(values []string) (key string, present bool, err error) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
		key, err = keying.ParseKeyHeader(values[0])
		return key, true, err
	default:
		return "", true, fmt.Errorf("%w: the header is repeated", errBadKey)
	}
}
