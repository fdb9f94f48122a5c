// Package idemkit stops duplicate submissions and makes operations
// idempotent over a pluggable store.
//
// The same request often reaches a backend twice: a double click, a
// gateway or client retry after a timeout, a queue redelivery, a payment
// callback sent again. The Engine answers "have I seen this request?" in
// one atomic store operation.
//
// # Modes
//
//   - Guard: reject a repeat of the same request fingerprint inside a short
//     window (ErrDuplicate with the time left).
//   - IssueToken / UseToken: accept only a one-time token the server
//     issued, bound to the principal it was issued to.
//   - Do (and the typed Do): run an operation once per business
//     idempotency key and answer every repeat with the stored result;
//     concurrent repeats get ErrInProgress (or wait, WithWait), a repeat
//     with a different payload gets ErrMismatch.
//
// # Claims, transactions and batches
//
// Begin claims a key like Do but hands the Claim to the caller, who ends it
// with Complete, Fail or Release. CompleteIn records the result through a
// store view bound to the caller's database transaction, so the record
// commits or rolls back with the business write. Do hands fn its claim in
// the context (ClaimFromContext; the typed CompleteIn encodes a value), so
// fn can complete inside its own transaction and Do does not complete
// again. OnStore runs the whole claim inside such a transaction. BeginBatch claims a fetched batch of
// messages in one store call where the store implements store.Batcher.
//
// # Completing inside a transaction
//
// Claim.CompleteIn, and the typed CompleteIn in Do's fn, record the result
// through a store view bound to the caller's transaction, so the record
// commits or rolls back with the business write. When fn returns, Do
// settles the claim by what happened to the transaction: committed, Do
// returns the recorded value, which every repeat of the key replays;
// rolled back, Do removes the claim's record, so a retry runs again, and
// returns what fn returned.
//
// A value over the size cap is refused with an error wrapping
// ErrResultTooLarge: roll back (after Begin, also Release), so the work is
// undone and a retry runs it again. The key is never released before the
// transaction has ended. Under KeepTerminal (the default, see
// WithOversized) CompleteIn writes the terminal record through the view
// all the same, so a caller that commits anyway leaves a key whose every
// repeat gets ErrResultTooLarge, never one that runs the committed work
// again; under ReleaseKey it writes nothing.
//
// # Leases and oversized results
//
// Do's first caller claims the key with an in-progress record that lives
// for the lease TTL (WithLease), extended by a heartbeat while fn runs
// (WithHeartbeat), runs fn, and records its result for the retention TTL
// (WithRetention). On an OnStore view no lease applies: the caller's
// transaction holds the key, the claim lives for the retention, and a
// transaction longer than the lease still records its result (see
// OnStore for a claim committed without being ended). When fn's result
// is over the size cap
// (WithMaxResultSize), the call that ran fn gets it in Result.Value with
// an error wrapping ErrResultTooLarge; by default (WithOversized) every
// repeat then gets an error wrapping ErrResultTooLarge, with Replayed set,
// and fn never runs again.
//
// # Keys and scopes
//
// Store key names hold only digests: <namespace>:<space>:<scope>:<key>,
// where the scope (WithScope, the principal that owns the key; a token's
// principal) and the key are SHA-256 digests, so nobody who can list the
// store's keys learns idempotency keys, principals or tokens.
// WithReadableKeys keeps them readable, for debugging. ScopeOf lets stores
// keep per-scope quotas.
//
// # Configuration
//
// Options given to New are the engine's defaults; With builds a validated
// per-route view once; options passed to a call apply to that call. An
// invalid option is an error wrapping ErrInvalid, never clamped or ignored.
//
// # Failures and observation
//
// When the store fails, the engine is fail-closed by default (ErrUnavailable,
// nothing runs unprotected); WithFailureMode(FailOpen) runs the work
// unguarded and reports it. Every outcome goes to an Observer (SlogObserver
// by default, which logs only key digests); an Observer that is also a
// Tracer gets a span around every call. Inspect, StoredResult and Forget
// serve operators.
//
// # Related packages
//
// Stores live in sibling packages: store/memstore (in-process),
// store/boltstore (embedded, durable), store/redisstore (Redis, Sentinel,
// Cluster) and store/sqlstore (PostgreSQL, MySQL/MariaDB); package policy
// composes them (time budgets, tiered fallback, near cache). Package keying
// builds fingerprints, keys and tokens. The adapters under adapters/ put the
// engine in front of net/http, gRPC and plain functions.
package idemkit
