// Package nearcache puts an in-process cache of settled results in front
// of a store.Store, so a repeat of a completed request is answered without
// a round trip. It is one of the policies that decide what idemkit does
// with its store (with budget and tiered); each is a store.Store, so they
// stack and the engine does not know they are there. Package nearcache
// imports only package store; what it must know of the engine's records
// comes in as a predicate (idemkit.Settled).
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
// The store New returns is a store.Closer, store.Pinger,
// store.SetNXValuer, store.Batcher and store.Scanner exactly when the
// wrapped store is (the rule of every idemkit store wrapper). SetNXValue
// and SetNXBatch answer cached keys from the cache like SetNX; a miss
// claims through the store's SetNX, whose TTL the cache needs, so a claim
// costs what it cost before the wrapper. Ping and Scan go to the store.
//
// # Caching
//
// The store New returns remembers, inside one process, keys it has seen
// held with a
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
// is none. The cache is bounded (WithCapacity keys, least recently used
// first; no value larger than WithMaxValue), split into independently
// locked shards; values are copied in and out. Put it outermost:
//
//	near, err := nearcache.New(tieredStore, idemkit.Settled)
//
// Every function in this package is safe for concurrent use.
package nearcache
