package keying

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// tokenBytes is the number of random bytes in a token: 256 bits.
const tokenBytes = 32

// NewToken returns a fresh one-time token: 256 bits from crypto/rand as
// unpadded base64url text (43 characters of A-Z, a-z, 0-9, '-' and '_').
// It is safe for concurrent use. The error, which wraps the one from
// crypto/rand, is nil in practice: since Go 1.24 crypto/rand does not
// return errors.
func NewToken() (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("keying: reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
