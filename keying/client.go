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

// ErrMalformedKey reports an idempotency key or token, as a client sent
// it, that idemkit refuses: every error of ParseKeyHeader and
// CheckClientKey wraps it, and so do the adapters' errors for a key
// header sent twice. The texts never quote the key, so they can go back
// to the client and into logs.
var ErrMalformedKey = errors.New("malformed value")

// CheckClientKey returns nil when key, as a client sent it (unquoted), is
// 1 to MaxKeyLen bytes of printable ASCII (0x20 to 0x7E), and otherwise an
// error wrapping ErrMalformedKey, whose text starts "keying: bad
// idempotency key: ". The error never quotes the key, so it can go back
// to the client and into logs.
func CheckClientKey(key string) error {
	switch {
	case key == "":
		return badClientKey("empty")
	case len(key) > MaxKeyLen:
		return badClientKey(fmt.Sprintf("%d bytes, at most %d", len(key), MaxKeyLen))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return badClientKey(fmt.Sprintf("byte %d is not printable ASCII", i))
		}
	}
	return nil
}

// badClientKey is an error of CheckClientKey. It wraps ErrMalformedKey,
// but its text is its own, which the gRPC adapter sends to the client.
type badClientKey string

// Error returns the text of the error.
func (e badClientKey) Error() string { return "keying: bad idempotency key: " + string(e) }

// Unwrap returns ErrMalformedKey.
func (badClientKey) Unwrap() error { return ErrMalformedKey }
