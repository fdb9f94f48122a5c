package httpcore

import (
	"fmt"
	"net/http"
	"strings"
	"unsafe"

	"github.com/idemkit/idemkit/keying"
)

// Header names, the same for every idemkit adapter (keying's).
const (
	// DefaultKeyHeader is the request header that carries the client's
	// idempotency key (draft-ietf-httpapi-idempotency-key-header).
	DefaultKeyHeader = keying.KeyHeader
	// DefaultTokenHeader is the request header that carries a one-time
	// token.
	DefaultTokenHeader = keying.TokenHeader
	// ReplayedHeader is "true" on every replayed response, never on a
	// fresh one.
	ReplayedHeader = keying.ReplayedHeader
)

// DefaultReplayHeaders are the response headers every adapter stores and
// replays, whatever it adds: without Content-Type and Content-Encoding a
// replayed body cannot be read.
func DefaultReplayHeaders() []string {
	return []string{"Content-Type", "Content-Encoding", "Location"}
}

// DefaultMaxStoredResponse is the largest response, in bytes, stored for
// replay unless configured otherwise.
const DefaultMaxStoredResponse = 1 << 20

// ErrBadKey is wrapped by every key parsing error (HeaderKey); its texts
// never quote the key, so they can go back to the client.
var ErrBadKey = keying.ErrMalformedKey

// HeaderKey returns the single value of a key or token header, sent as
// values, parsed with keying.ParseKeyHeader. present reports whether the
// header was sent at all; a repeated header is an error.
func HeaderKey[V string | []byte](values []V) (key V, present bool, err error) {
	switch len(values) {
	case 0:
		return key, false, nil
	case 1:
		key, err = keying.ParseKeyHeader(values[0])
		return key, true, err
	}
	return key, true, fmt.Errorf("%w: the header is repeated", ErrBadKey)
}

// DefaultStorePolicy stores 2xx and 4xx responses except 408, 409, 425
// and 429, which say "try again", and does not store 1xx, 3xx or 5xx.
func DefaultStorePolicy(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return false
	default:
		return status >= 400 && status < 500
	}
}

// ValidToken reports whether s is a non-empty RFC 9110 token, as header
// names and methods are.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

// tchar marks the RFC 9110 token characters.
var tchar = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// Transient returns b as a string without a copy, for a callee that only
// reads it during the call: b must not change while the string is in use.
func Transient(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
