// Package policy decides what idemkit does when its store is slow or down,
// by composing stores: a time budget per call (Budget), a tiered store that
// falls back to a second store behind a circuit breaker (Tiered), and an
// in-process near cache (NearCache). Each is a store.Store, so they stack
// and the engine does not know they are there. Package policy imports only
// package store; the engine does not import policy.
//
// # When the store fails
//
// A store call that fails with an error wrapping store.ErrUnavailable (the
// backend is unreachable, or did not answer within its budget) leaves the
// engine unable to tell a first request from a repeat. Three answers exist;
// the first two are engine options (idemkit.WithFailureMode, per engine and
// per call), the third is a store from this package:
//
//	Policy        How                          During the outage                        Guarantees
//	------------  ---------------------------  ---------------------------------------  --------------------------------------------
//	fail-closed   idemkit.WithFailureMode(     every request gets ErrUnavailable        nothing runs unprotected; requests are
//	(default)       idemkit.FailClosed)        (HTTP 503 + Retry-After, gRPC            refused instead
//	                                           Unavailable); fn does not run
//	fail-open     idemkit.WithFailureMode(     every request runs fn unguarded; the     availability first; duplicates run twice,
//	                idemkit.FailOpen)          observer gets EventFailOpen with the     but each unguarded run is counted
//	                                           cause
//	tiered        NewTiered(primary,           requests are deduplicated in the         dedup within this instance from the moment
//	                fallback)                  fallback of this instance; claims are    of the outage; NOT across instances, NOT
//	                                           copied to the primary on recovery        against keys claimed before the outage
//
// How to choose: fail-closed when running a request twice costs more than
// refusing it (payments, orders, anything with money or stock);
// fail-open when refusing costs more than a duplicate, and duplicates are
// harmless or caught downstream (notifications, idempotent writes);
// tiered when you want to keep serving and most duplicates reach the same
// instance (sticky sessions, a single-replica service, client retries on
// one connection), accepting that a duplicate that lands on another
// instance during the outage runs twice. Tiered composes with either mode:
// if the fallback fails too, the engine's mode applies.
//
// Wrap the primary in a Budget in every case, so a slow store becomes an
// ErrUnavailable within a known time instead of a stalled request:
//
//	redis := policy.Budget(redisstore, 100*time.Millisecond)
//	tiered := policy.NewTiered(redis, memstore.New())
//	engine, err := idemkit.New(tiered, idemkit.WithFailureMode(idemkit.FailClosed))
//
// # Time budget
//
// Budget gives each call its own timeout (DefaultBudget, 100 ms, unless
// set). An overrun returns an error wrapping store.ErrUnavailable and
// context.DeadlineExceeded; the caller's own cancellation is reported as
// the caller's. By default a call runs detached, so even a store that
// ignores its context is cut off at the budget; WithInline trades that for
// less overhead with stores that honour their context.
//
// # Tiered fallback
//
// Tiered sends every operation to the primary while its circuit breaker
// (github.com/sony/gobreaker/v2) is closed; the fallback is not touched.
// An operation the primary fails is answered by the fallback at once.
// After WithFailureThreshold consecutive failures the breaker opens and the
// fallback answers everything; after WithCoolDown one probe goes to the
// primary, and when it answers the breaker closes. Keys written to the
// fallback are journaled and, on recovery, copied forward to the primary
// with their remaining TTL (SetNX: a key claimed meanwhile through another
// instance wins, and the conflict is counted and reported). Stats and
// WithTierObserver expose all of it.
//
// # Near cache
//
// NearCache remembers, inside one process, keys it has seen held with a
// value that cannot change before it expires (WithSettled(idemkit.Settled):
// completed results and Guard claims kept until expiry), and answers
// repeats of them without a round trip. It only ever answers "held", never
// "free", and never past the TTL the store reported. Put it outermost:
//
//	near := policy.NewNearCache(tiered, policy.WithSettled(idemkit.Settled))
//
// Every type and function in this package is safe for concurrent use.
package policy
