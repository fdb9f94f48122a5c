package boltstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
)

// keyRef identifies key in an error text without revealing it: keys may
// hold secrets (tokens, principals), so errors name a key only by the
// first 12 hex digits of its SHA-256, as "key sha256:0123456789ab".
func keyRef[K ~string | ~[]byte](key K) string {
	sum := sha256.Sum256([]byte(key))
	return "key sha256:" + hex.EncodeToString(sum[:6])
}

// hexRun matches a run of hex digits long enough to be bytes of a key:
// some of bbolt's panics print keys in hex.
var hexRun = regexp.MustCompile(`[0-9A-Fa-f]{8,}`)

// scrub returns the text of a recovered panic value with every long run
// of hex digits replaced, so that no key bytes reach an error text.
func scrub(p any) string {
	return hexRun.ReplaceAllString(fmt.Sprint(p), "[hex redacted]")
}
