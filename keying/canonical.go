package keying

import "github.com/idemkit/idemkit/internal/canonjson"

// Errors returned by Canonicalize.
var (
	// ErrNotJSON reports a body that is not a single valid JSON value:
	// a syntax error, invalid UTF-8, a lone UTF-16 surrogate escape, data
	// after the value, or nesting deeper than 1000 levels.
	ErrNotJSON = canonjson.ErrNotJSON
	// ErrDuplicateName reports an object that holds the same member name
	// twice (after unescaping). Such a document is ambiguous: parsers
	// disagree about which value wins.
	ErrDuplicateName = canonjson.ErrDuplicateName
)

// Canonicalize returns the canonical form of the JSON document body, with
// the members that volatile names dropped. Each entry of volatile is a path
// written as described at WithVolatile (a bare name is a top-level member
// only); nil drops nothing. Names match case-sensitively after unescaping.
// Documents that differ only in member order, whitespace, or number or
// string spelling have the same canonical form; see the package
// documentation, section "Canonical JSON". Canonicalize is safe for
// concurrent use and does not modify body.
//
// It returns an error wrapping ErrInvalidPath when a path is malformed,
// ErrNotJSON when body is not a single valid JSON value, and
// ErrDuplicateName when an object repeats a member name (dropped names
// included).
func Canonicalize(body []byte, volatile []string) ([]byte, error) {
	return canonjson.Canonicalize(body, volatile)
}
