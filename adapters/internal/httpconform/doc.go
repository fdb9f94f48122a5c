// Package httpconform is the HTTP contract every framework adapter on
// netcore (idemgin, idemecho) passes through its framework's real server
// on a loopback port, as storetest is the stores': missing and malformed
// keys, mismatch 422, in-progress 409 with Retry-After, byte-for-byte
// replay, concurrent duplicates run once, oversized responses terminal,
// principal scoping, responses that are not stored, store failures, and
// the Window and Token modes.
//
// An adapter's test gives Run a Framework: a function that serves the
// Orders handler behind the adapter's middleware of a mode, configured by
// Config, and returns the server's base URL.
package httpconform
