// Package tiered decides what idemkit does while its store is down by
// falling back to a second store: New returns a store.Store over a primary
// and a fallback behind a circuit breaker. It is one of the policies that
// decide what idemkit does when its store is slow or down (with budget and
// nearcache); each is a store.Store, so they stack and the engine does not
// know they are there. Package tiered imports only package store; what it
// must know of the engine's records comes in as a predicate
// (idemkit.Supersedes).
//
// # When the store fails
//
// A store call that fails with an error wrapping store.ErrUnavailable (the
// backend is unreachable, or did not answer within its budget) leaves the
// engine unable to tell a first request from a repeat. Three answers exist;
// the first two are engine options (idemkit.WithFailureMode, per engine and
// per call), the third is this package:
//
//	Policy        How                          During the outage                        Guarantees
//	------------  ---------------------------  ---------------------------------------  --------------------------------------------
//	fail-closed   idemkit.WithFailureMode(     every request gets ErrUnavailable        nothing runs unprotected; requests are
//	(default)       idemkit.FailClosed)        (HTTP 503 + Retry-After, gRPC            refused instead
//	                                           Unavailable); fn does not run
//	fail-open     idemkit.WithFailureMode(     every request runs fn unguarded; the     availability first; duplicates run twice,
//	                idemkit.FailOpen)          observer gets EventFailOpen with the     but each unguarded run is counted
//	                                           cause
//	tiered        tiered.New(primary,           once the breaker is open, requests are   dedup within this instance from the moment
//	                fallback, ...)             deduplicated in the fallback of this     the breaker opens; NOT across instances,
//	                                           instance; its claims are copied to the   NOT against keys claimed before the outage
//	                                           primary on recovery
//
// How to choose: fail-closed when running a request twice costs more than
// refusing it (payments, orders, anything with money or stock);
// fail-open when refusing costs more than a duplicate, and duplicates are
// harmless or caught downstream (notifications, idempotent writes);
// tiered when you want to keep serving and most duplicates reach the same
// instance (sticky sessions, a single-replica service, client retries on
// one connection), accepting that a duplicate that lands on another
// instance during the outage runs twice. Tiered composes with either mode:
// whatever Tiered cannot answer (below) is an ErrUnavailable, and the
// engine's mode applies to it.
//
// Wrap the primary in a budget (package budget) in every case, so a slow
// store becomes an
// ErrUnavailable within a known time instead of a stalled request:
//
//	redis, err := budget.New(redisstore, budget.Default)
//	...
//	mem, err := memstore.New()
//	...
//	s, err := tiered.New(redis, mem, idemkit.Supersedes)
//	...
//	engine, err := idemkit.New(s, idemkit.WithFailureMode(idemkit.FailClosed))
//
// # Configuration and ownership
//
// New returns an error wrapping store.ErrInvalid (idemkit.ErrInvalid) for a
// nil store or predicate and for invalid options, naming every problem and
// a nil option by its position; no option is clamped, and none falls back
// to a default in silence. The store New returns owns the stores it wraps:
// its Close closes them, once, however often it is called. Close only the
// outermost store.
//
// # Optional interfaces
//
// The store New returns is its primary with a fallback for outages: it is a
// store.Pinger, store.SetNXValuer, store.Batcher and store.Scanner exactly
// when its primary is, and always a store.Closer (it owns the goroutine
// that copies keys forward). While the fallback answers, it serves each
// with its own method when it has one, and otherwise with its core
// methods: SetNXValue as SetNX without the TTL, SetNXBatch as one SetNX
// per item, Ping as answering; Scan lists the primary's keys and then the
// keys the fallback holds for the primary. Ping reports whether the store
// can serve: nil when the primary answers, or when it does not but the
// fallback does.
//
// # Tiered fallback
//
// Tiered sends every operation to the primary while its circuit breaker
// (github.com/sony/gobreaker/v2) is closed; the fallback is not touched. A
// primary failure (an error wrapping store.ErrUnavailable) is returned as
// it is: the write may have happened in the primary with its reply lost,
// so it is never made again in the fallback as if fresh, and the engine's
// failure mode and undo apply. After WithFailureThreshold consecutive
// failures the breaker opens and the fallback answers every operation;
// after WithCoolDown one probe goes to the primary, and when it answers
// the breaker closes. Errors caused by the caller's own context, and other
// errors (ErrInvalid, ErrNotFound, ErrCorrupt), do not count as failures.
//
// While the breaker is open, "absent" from the fallback is an answer only
// for keys the fallback received during the outage: a Get, CompareAndSwap
// or Consume of any other key (a token issued before the outage, a claim
// made in the primary) returns an error wrapping store.ErrUnavailable,
// since the primary may hold the key. A CompareAndDelete the primary did
// not confirm (it failed, or the fallback did not hold the value) returns
// an error wrapping store.ErrUnavailable and is remembered, to be replayed.
//
// Every key the fallback stores (a SetNX that set, a CompareAndSwap that
// swapped) is kept in a bounded journal (WithJournalSize), together with
// the deletes the primary still owes: those it did not confirm, and every
// value the fallback replaced, swapped away, deleted or consumed (a copy
// of it may have reached the primary with its reply lost). When the
// primary answers again, a background goroutine replays each key's deletes
// on the primary, then copies the key, if still live, with SetNX and its
// remaining TTL, and deletes it from the fallback. If the primary still
// holds another value for the key, the predicate given to New
// decides: a value the fallback's value supersedes (an earlier state of
// the same claim that the journal could not follow) is replaced; any other
// (a claim made meanwhile through another instance) wins, and the conflict is
// counted and reported (EventConflict). An operation on a journaled key
// brings that key forward first, so once the primary answers, this
// instance never sees its own outage claims as free. A copy-forward of a
// key and a change to that key in the fallback never interleave (they
// share a per-key lock, striped).
//
// What tiering guarantees: requests that reach this instance after the
// breaker opened are deduplicated among themselves, and their claims reach
// the primary when it returns. What it does not guarantee: deduplication
// across instances (each has its own fallback), nor against keys claimed
// in the primary before the outage (the fallback has never seen them), nor
// against data the primary itself lost (a Redis restarted without
// persistence), nor copy-forward of keys written while the journal was
// full (EventJournalFull). A Tiered is therefore weaker than fail-closed and
// stronger than fail-open. StatsOf and WithObserver expose all of it.
//
// Every function in this package is safe for concurrent use.
package tiered
