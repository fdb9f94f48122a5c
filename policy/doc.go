// Package policy decides what idemkit does when its store is slow or down,
// by composing stores: a time budget per call (Budget), a tiered store that
// falls back to a second store behind a circuit breaker (Tiered), and an
// in-process near cache (NearCache). Each is a store.Store, so they stack
// and the engine does not know they are there. Package policy imports only
// package store; the engine does not import policy, and what policy must
// know of the engine's records comes in as a predicate (idemkit.Supersedes,
// idemkit.Settled).
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
//	tiered        NewTiered(primary,           once the breaker is open, requests are   dedup within this instance from the moment
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
// Wrap the primary in a Budget in every case, so a slow store becomes an
// ErrUnavailable within a known time instead of a stalled request:
//
//	redis, err := policy.Budget(redisstore, policy.DefaultBudget)
//	...
//	mem, err := memstore.New()
//	...
//	tiered, err := policy.NewTiered(redis, mem, idemkit.Supersedes)
//	...
//	engine, err := idemkit.New(tiered, idemkit.WithFailureMode(idemkit.FailClosed))
//
// # Configuration and ownership
//
// Constructors return an error wrapping store.ErrInvalid for a nil store
// or predicate and for an invalid option, and the error names the option;
// no option is clamped, and none falls back to a default in silence.
// A wrapper owns the stores it wraps: Close on a Budget, a Tiered or a
// NearCache closes what it wraps (a Tiered both tiers), once, however often
// it is called. Close only the outermost store.
//
// # Time budget
//
// Budget gives each call its own timeout. An overrun returns an error
// wrapping store.ErrUnavailable and context.DeadlineExceeded; the caller's
// own cancellation is reported as the caller's. By default a call runs
// detached on its own goroutine, so even a store that ignores its context
// is cut off at the budget (go-redis with default options does not let a
// context deadline interrupt a read, and waits for its ReadTimeout, 5 s).
// A call cut off this way keeps running in the background until the store
// returns; whether it took effect is unknown, as with any ErrUnavailable,
// and the engine undoes a claim it cannot confirm. So that the undo never
// overtakes the claim it undoes (which would then land and stay), a call
// on a key first waits, within its own budget, for a call on that key that
// was cut off and is still running. At most WithMaxAbandoned
// such calls run at a time; past that, calls fail at once, so a hung store
// costs bounded memory. Detaching costs a goroutine, a channel and a copy
// of the value per call, a few microseconds: noise next to a network round
// trip. WithInline trades that for relying on the store to honour its
// context: store/memstore does; store/redisstore does only when its
// go-redis client has ContextTimeoutEnabled set.
//
// # Sizing the budget
//
// The budget must sit above the slowest answers of a healthy store under
// your peak load, or it turns them into outages: under fail-closed a 503,
// under fail-open an unguarded run, and in either case a claim whose
// outcome is unknown. It also bounds how long a request waits when the
// store is really gone. Measure the p99.9 of your store calls at peak
// concurrency on a loaded machine and choose a budget above it.
// TestBudgetSizingUnderCPULoad in this package measures it for Redis:
//
//	IDEMKIT_MEASURE_BUDGET=1 go test -run TestBudgetSizingUnderCPULoad -v -count=1 ./policy/
//
// On a 2-core machine already at a load average above 20, against
// redis-server on loopback, through redisstore and go-redis's default pool
// (10 connections per CPU), SetNX and CompareAndSwap took (ranges over two
// runs of 10 s per row):
//
//	load                                   callers  p50          p99          p99.9        max
//	none added                             8        0.3-0.4 ms   4-5 ms       15-18 ms     68 ms-1.4 s
//	another process saturating both CPUs   8        0.4 ms       8-10 ms      36-47 ms     151-271 ms
//	another process saturating both CPUs   80       6.5-7.7 ms   101-115 ms   0.53-0.96 s  0.86-1.5 s
//	this process spinning on both CPUs     8-80     0.07-99 ms   0.13-3 s     1-3.3 s      1-3.3 s
//
// DefaultBudget, 1 s, sits above the p99.9 of every run where another
// process saturated the CPUs, even with four times more callers than
// go-redis has connections; there it cut off none of the calls of 8
// callers and at most 0.08% of those of 80, where the old default, 100 ms,
// cut off 0.02-0.03% and 1.1%. No budget helps a process that starves its
// own goroutines of CPU: there the p99.9 reached seconds.
// Two properties of go-redis's pool matter: past PoolSize concurrent
// calls, a call waits for a free connection (9 ms on average with 80
// callers and another process loading the CPUs, 276 ms with this process
// loading them), and that wait counts against the budget, so raise
// PoolSize to your peak concurrency; and it waits up to PoolTimeout
// (ReadTimeout + 1 s, 6 s by default) before failing, so the budget, not
// PoolTimeout, is what bounds the wait. Connections are dialled on demand
// and kept; a healthy run dials each once.
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
// holds another value for the key, the predicate given to NewTiered
// decides: a value the fallback's value supersedes (an earlier state of
// the same claim that the journal could not follow) is replaced; any other
// (a claim made meanwhile through another instance) wins, and the conflict is
// counted and reported (TierConflict). An operation on a journaled key
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
// full (TierJournalFull). A Tiered is therefore weaker than fail-closed and
// stronger than fail-open. Stats and WithTierObserver expose all of it.
//
// # Near cache
//
// NearCache remembers, inside one process, keys it has seen held with a
// settled value: one that cannot change before it expires (with the
// engine, idemkit.Settled: completed results and Guard claims kept until
// expiry). When SetNX or Get returns a settled value, the cache keeps a
// copy until the local time the call started plus the TTL the store
// reported, and answers later SetNX and Get calls of that key "held", with
// the cached value and the remaining TTL, without a round trip. It never
// answers "free". CompareAndSwap, CompareAndDelete and Consume always go to
// the store and drop the key from the cache before and after the call. A
// change made to a settled value through another path (another instance)
// is not seen until the cached copy expires; the predicate promises there
// is none. The cache is bounded (WithNearCapacity keys, least recently used
// first; no value larger than WithNearMaxValue), split into independently
// locked shards; values are copied in and out. Put it outermost:
//
//	near, err := policy.NewNearCache(tiered, idemkit.Settled)
//
// Every type and function in this package is safe for concurrent use.
package policy
