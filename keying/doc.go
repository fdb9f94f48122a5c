// Package keying builds the identities idemkit stores things under: request
// fingerprints, unambiguous store keys and one-time tokens. It uses the
// standard library only, and every exported function and method is safe for
// concurrent use.
//
// # Keys
//
// [Key] joins parts (a namespace, a principal, an operation, a client's
// idempotency key...) into one store key such that two different part lists
// never yield the same key, whatever bytes the parts hold. Short printable
// parts stay readable, so operators can find keys in redis-cli; long or
// binary parts, and parts wrapped in [Hidden], are replaced by a marked
// digest, which keeps keys bounded.
//
// # Key encoding
//
// Different part lists always give different keys (up to SHA-256
// collisions): [Key] joins parts with ':', and writes each part in exactly
// one of three forms that cannot be confused with one another or with a
// separator:
//
//   - The empty part is written "%", so Key("a", "") ("a:%") differs from
//     Key("a") ("a").
//   - A literal part is printable ASCII (0x20 to 0x7E) whose escaped form is
//     at most 48 bytes long. It is written as is, except that the bytes
//     '%', ':', '#', '{', '}' and space are written as %XX with upper-case
//     hex (':' becomes "%3A"). A literal form therefore never contains ':',
//     '{', '}' or space, never starts with '#', and is never the lone "%".
//   - Any other part (longer, or holding a byte outside printable ASCII, as
//     every [Hidden] value does) is written as '#' followed by the unpadded
//     base64url text of the first 192 bits of its SHA-256 digest: 33 bytes.
//
// A key of n parts is thus at most 49n-1 bytes long: at most 391 bytes for
// 8 parts, well under the stores' 512-byte limit, leaving room for a
// prefix. Key with no parts returns "", which no store accepts.
//
// Redis Cluster: keys never contain '{' or '}', because braces in parts are
// escaped, so no part can inject a hash tag. To keep related keys in one
// slot, put your own tag in front, e.g. "{" + tenant + "}:" + Key(...), where
// tenant is a value you control.
//
// # Fingerprints
//
// A [Fingerprinter] hashes what a request means rather than how it was
// spelled: who sent it, which operation it names, the parameters that matter
// and its body. JSON bodies are canonicalized first (see [Canonicalize]), so
// key order, whitespace, number spelling and string escaping do not change
// the fingerprint. Every member counts unless [WithVolatile] names its path:
// for an idempotency key the whole payload is the request, while a dedup
// window can ignore what changes between two submits of one form
// ([WindowVolatile]: top-level traceId, timestamp and the like). Every field
// but the body, which comes last, is length-prefixed before hashing, so bytes
// cannot move from one field to another without changing the result. A
// fingerprint is 22 characters of base64url, 128 bits of SHA-256 ([SumLen]).
//
// [Fingerprinter.Sum] hashes a body that is a valid JSON value without
// duplicate member names in its canonical form, without the
// fingerprinter's volatile members, so bodies that differ only in member
// order, whitespace, number or string spelling, or those members share a
// fingerprint. Any other body, including an empty one, is hashed as raw
// bytes, in a separate domain so that it never collides with a JSON body.
// Parameters are hashed with their names sorted and each name's values in
// the order given; a name with no values counts as absent.
//
// # Canonical JSON
//
// The canonical form that [Canonicalize] returns has no insignificant
// whitespace, and:
//
//   - Object members are sorted by name in byte order of their UTF-8
//     encoding, which is Unicode code point order (not the UTF-16 order of
//     RFC 8785).
//   - Strings are written with the escapes \" \\ \b \f \n \r \t, \u00XX
//     (lower-case hex) for other control characters, and every other
//     character as raw UTF-8; so "\u0041" and "A" are the same string.
//   - Numbers are written by value with no precision loss (they never go
//     through float64): 1, 1.0, 1e0 and 10E-1 all become 1, -0 becomes 0.
//     Integers of up to 40 digits are written in full; fractions whose
//     first significant digit lies at most 7 places after the point are
//     written as plain decimals (0.0000001); all others use the form
//     d.ddde±x (1e40, 1.5e-8).
//   - Array elements keep their order.
//
// # Tokens
//
// [NewToken] returns a 256-bit random token from crypto/rand in URL-safe
// text, for one-time form or submit tokens.
package keying
