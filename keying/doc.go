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
// digest, which keeps keys bounded. See [Key] for the exact encoding.
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
// fingerprint is 43 characters of base64url ([SumLen]).
//
// # Tokens
//
// [NewToken] returns a 256-bit random token from crypto/rand in URL-safe
// text, for one-time form or submit tokens.
package keying
