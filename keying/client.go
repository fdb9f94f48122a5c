package keying

import (
	"errors"
	"fmt"
)

// Names and limits every transport shares, so that the HTTP and gRPC
// adapters, their clients and the demo agree on one spelling. HTTP uses
// the canonical form given here; gRPC metadata keys are the same names in
// lower case.
const (
	// KeyHeader carries a client's idempotency key
	// (draft-ietf-httpapi-idempotency-key-header).
	KeyHeader = "Idempotency-Key"
	// TokenHeader carries a one-time token from NewToken.
	TokenHeader = "Idempotency-Token"
	// ReplayedHeader is set to "true" on a response replayed from the
	// store, and never on a fresh one.
	ReplayedHeader = "Idempotent-Replayed"
	// MaxKeyLen is the longest idempotency key or token, in bytes, that a
	// client may send. Key writes a part this long as a digest, so store
	// keys stay bounded whatever the client sends.
	MaxKeyLen = 255
)

// ErrBadClientKey reports an idempotency key or token that CheckClientKey
// refuses.
var ErrBadClientKey = errors.New("keying: bad idempotency key")

// CheckClientKey returns nil when key, as a client sent it (unquoted), is
// 1 to MaxKeyLen bytes of printable ASCII (0x20 to 0x7E), and otherwise an
// error wrapping ErrBadClientKey. The error never quotes the key, so it
// can go back to the client and into logs.
func CheckClientKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrBadClientKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadClientKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is not printable ASCII", ErrBadClientKey, i)
		}
	}
	return nil
}
