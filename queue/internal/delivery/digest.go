package delivery

import (
	"crypto/sha256"
	"encoding/hex"
)

// Digest returns a fingerprint of a message body, for adapters that check
// payloads by default: 128 bits of its SHA-256, in hex.
func Digest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}
