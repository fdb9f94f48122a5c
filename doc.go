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
// Do's first caller claims the key with an in-progress record whose lease
// (WithLease) a heartbeat extends while fn runs (WithHeartbeat), runs fn,
// and records its result for the retention TTL (WithRetention). A claim
// whose lease ended (its caller crashed, or stalled past it) is taken
// over by the next caller; its record outlives the lease by the retention
// only to keep the key's fencing token (see "Fencing tokens"). On an OnStore view no lease applies: the caller's
// transaction holds the key, the claim lives for the retention, and a
// transaction longer than the lease still records its result (see
// OnStore for a claim committed without being ended). When fn's result
// is over the size cap
// (WithMaxResultSize), the call that ran fn gets it in Result.Value with
// an error wrapping ErrResultTooLarge; by default (WithOversized) every
// repeat then gets an error wrapping ErrResultTooLarge, with Replayed set,
// and fn never runs again.
//
// Lease loss stops the work. fn's context is cancelled, with cause
// ErrLeaseLost (context.Cause), when a heartbeat finds the lease lost
// (another caller holds the key), or cannot confirm it before it ends:
// the store fails or does not answer, and the lease ends one lease after
// the last confirmation (the sending of the last beat that succeeded, or
// at first the claim's admission). A failed beat is retried one interval
// later, or half an interval before the lease ends when that is sooner;
// a beat hanging in the store does not delay the cancellation. One
// EventLeaseLost is reported per claim, and the claim records nothing:
// Do returns fn's value with an error wrapping ErrLeaseLost. fn should
// stop when its context is done, as another caller may run the work once
// the lease has ended in the store. fn's context is also cancelled when
// fn returns. A claim from Begin has no context for the work: a beat that
// finds its lease lost reports the loss and Complete then returns
// ErrLeaseLost, but a lease that ends unconfirmed is left to Complete's
// swap, which fails only if another caller took the key over. Without a
// heartbeat (WithoutHeartbeat, OnStore) nothing is cancelled.
//
// # Fencing tokens
//
// Every claim of an idempotency key (Do, Begin, BeginBatch) carries a
// fencing token (Claim.Fence, FenceFromContext in fn), larger than the
// token of every earlier claim of the key for as long as the key holds a
// record: while a claim runs, for the retention after its lease ended or
// it was released, and for the retention of its result. Work that calls
// another system passes the token along; a system that keeps the highest
// token it has seen per key, and refuses a lower one, cannot be reached by
// a caller that lost its lease without knowing it yet (stalled by a pause
// of its process or its network) once the caller that took the key over
// has been there. A heartbeat rewrites the record, so a takeover that read
// it before a late beat landed fails instead of overwriting a lease that
// was just renewed. Without a record (a new key, or one forgotten with
// Forget), a key's first token comes from the engine's clock
// (milliseconds since 1970 shifted left by 16 bits): it is larger than
// tokens handed out longer ago than the clocks of the engine's instances
// differ. Tokens of UseToken claims come from the clock alone: a token is
// used once and never taken over.
//
// # Keys and scopes
//
// Store key names hold only digests: <namespace>:<space>:<scope>:<key>,
// where the scope (WithScope, the principal that owns the key; a token's
// principal) and the key are digests. ScopeOf lets stores keep per-scope
// quotas. WithReadableKeys writes them readable instead, for debugging.
//
// What the digests protect depends on WithKeySecret:
//
//   - Without a secret (the default) they are plain SHA-256. That hides a
//     key or principal that cannot be guessed (a random idempotency key,
//     a token, a UUID), and keeps names short, but it does not hide one
//     that can: anyone who can list the store's keys (Redis SCAN, SELECT
//     idem_key), read its values or read the logs can hash guesses and
//     compare. A million guesses (first names, e-mail addresses, integers)
//     take about a second and recover principals such as "alice",
//     "bob@example.com" or "42" and keys such as "order-1". The stored
//     fingerprint of a Do record is kept as the caller gave it, so a
//     fingerprint that is itself a plain digest of something guessable
//     (an adapter's digest of a key) can be reversed the same way.
//   - With a secret (WithKeySecret, at least 32 random bytes, the same on
//     every instance and in idemctl), key names, the fingerprints stored
//     in Do records and the key digests of logs and error texts are
//     HMAC-SHA-256 under it: nobody without the secret can test a guess.
//     What stays visible: how many keys each scope has (the scope segment
//     is one per scope), their mode, sizes and times, and stored results
//     themselves (keep secrets out of results, or encrypt them).
//
// The log digest (Event.KeyDigest, (*Engine).KeyDigest) covers the scope
// as well as the key, so the same key of two principals is logged as two
// digests.
//
// Changing the secret changes every key name: records written under the
// old secret are no longer found. It is a cut-over, not a rotation with a
// fallback: for the retention after the change, a retry of a request
// completed before it runs the work again, a request in flight across it
// can run twice, and tokens issued before it are refused (ErrTokenInvalid);
// Guard windows restart. Change it when that is acceptable (traffic
// drained, or a maintenance window at least as long as the longest lease
// and, for results that must replay, the retention), on every instance at
// once; the old records expire by their TTLs. Adding a secret to a
// deployment without one is such a change too.
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
