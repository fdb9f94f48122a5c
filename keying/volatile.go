package keying

import (
	"slices"

	"github.com/idemkit/idemkit/internal/canonjson"
)

// ErrInvalidPath reports a volatile field path that does not follow the
// syntax described at WithVolatile.
var ErrInvalidPath = canonjson.ErrInvalidPath

// windowVolatile lists the top-level members WindowVolatile returns.
var windowVolatile = []string{"nonce", "random", "sign", "timestamp", "traceId"}

// WindowVolatile returns a new slice holding the paths of the top-level
// members that commonly change between two submissions of the same form
// (nonce, random, sign, timestamp and traceId), for a dedup window:
// NewFingerprinter(WithVolatile(WindowVolatile()...)). Key mode should not
// use it: there the whole payload is the request.
func WindowVolatile() []string {
	return slices.Clone(windowVolatile)
}
