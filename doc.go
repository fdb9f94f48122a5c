// Package idemkit stops duplicate submissions and makes operations
// idempotent over a pluggable store.
//
// The same request often reaches a backend twice: a double click, a
// gateway or client retry after a timeout, a queue redelivery, a payment
// callback sent again. The Engine answers "have I seen this request?" in
// one atomic store operation and offers three modes:
//
//   - Guard: reject a repeat of the same request fingerprint inside a short
//     window (ErrDuplicate with the time left).
//   - IssueToken / UseToken: accept only a one-time token the server
//     issued, bound to the principal it was issued to.
//   - Do (and the typed Do): run an operation once per business
//     idempotency key and answer every repeat with the stored result;
//     concurrent repeats get ErrInProgress (or wait), a repeat with a
//     different payload gets ErrMismatch.
//
// Stores live in sibling packages: store/memstore (in-process),
// store/boltstore (embedded, durable) and store/redisstore (Redis,
// Sentinel, Cluster); package policy composes them (time budgets, tiered
// fallback, near cache). Package keying builds fingerprints, keys and
// tokens. The adapters under adapters/ put the engine in front of net/http,
// gRPC and plain functions.
//
// When the store fails, the engine is fail-closed by default (ErrUnavailable,
// nothing runs unprotected); WithFailureMode(FailOpen) runs the work
// unguarded and reports it to the Observer.
package idemkit
