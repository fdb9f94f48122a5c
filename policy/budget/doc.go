// Package budget gives each call to a store.Store its own time budget, so
// a slow or hung store becomes an error wrapping store.ErrUnavailable
// within a known time instead of a stalled request. It is one of the
// policies that decide what idemkit does when its store is slow or down
// (with tiered and nearcache); each is a store.Store, so they stack and
// the engine does not know they are there. Wrap the primary store in a
// budget in every case:
//
//	redis, err := budget.New(redisstore, budget.Default)
//	...
//	fallback, err := memstore.New()
//	...
//	s, err := tiered.New(redis, fallback, idemkit.Supersedes)
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
// The store New returns is a store.Closer, store.Pinger, store.SetNXValuer,
// store.Batcher and store.Scanner exactly when the wrapped store is (the
// rule of every idemkit store wrapper). Ping, SetNXValue and SetNXBatch
// run under the budget as every call does (a batch has one budget for the
// whole call, and its keys wait, as single calls do, for cut-off calls on
// them); Scan, which lists a whole store and calls its function on the
// caller's goroutine, runs under the caller's context only.
//
// # Time budget
//
// A budgeted store gives each call its own timeout. An overrun returns an error
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
//	IDEMKIT_MEASURE_BUDGET=1 go test -run TestBudgetSizingUnderCPULoad -v -count=1 ./policy/budget/
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
// Default, 1 s, sits above the p99.9 of every run where another
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
// Every function in this package is safe for concurrent use.
package budget
