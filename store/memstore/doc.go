// Package memstore is a bounded, in-process store.Store.
//
// A Store holds at most a number of entries (WithCapacity) and of bytes
// (WithMaxBytes), split evenly across independently locked shards so that
// operations on different keys rarely contend. Its data lives only as long
// as the process, and it protects only callers in that process: use it for
// a single instance, for tests, or as a near cache, not to deduplicate
// across replicas. A Store is safe for concurrent use.
//
// # Bounds
//
// An entry counts len(key) + len(value) + EntryOverhead bytes, and every
// scope (see "Scopes") holding entries in a shard counts len(scope) + 160
// there; keys without a scope count nothing more. EntryOverhead (160)
// estimates the entry's node, its map slot and their allocator rounding,
// measured at 130-150 bytes on amd64; the allocator may round a value up
// by as much as an eighth of its size, which is not counted. Every shard
// holds at most its share of both bounds at every moment, so the Store
// never exceeds them, even under concurrent writes. A write whose entry
// alone, with its scope's bookkeeping, exceeds a shard's byte budget
// fails with ErrTooLarge and changes nothing.
//
// The defaults are 100,000 entries, 256 MiB, and max(16, 4*GOMAXPROCS)
// shards, lowered until every shard has room for an entry of the largest
// size the store contract allows (store.MaxKeyLen + store.MaxValueLen)
// and for a whole scope quota: 15 shards with the default byte budget.
// A shard count set with WithShards is never changed.
//
// # Claims in progress
//
// A value in the engine's record layout of a claim in progress (work
// running under a lease) is never evicted while it lives: losing it would
// let a duplicate run the work a second time. A CompareAndSwap that keeps
// such a value (a heartbeat extending the lease) keeps the entry a claim;
// one that completes it makes it an ordinary entry. A write that needs
// room the Store can make only by evicting claims fails instead, changing
// nothing, with an error wrapping both ErrFull and store.ErrUnavailable,
// which the engine answers as a store failure: under its default
// fail-closed policy the work does not run, and idemhttp answers 503 with
// Retry-After. The Store counts such refusals (Refusals) and reports each
// one (WithOnFull). Claims leave when they complete, are released, are
// taken over, or expire. The engine keeps a claim's record past its lease
// (for the retention) to keep the key's fencing token, so a claim whose
// caller gave up without ending it stays a claim until the next request
// for its key takes it over, or until that expiry: size the store for
// the abandoned claims a process can leave, or end every claim.
//
// # Eviction
//
// A write that needs room in a full shard frees it in this order:
//
//  1. An expired entry: the least recently used entry of a segment of the
//     scope in step 2 if it has expired, otherwise every expired entry
//     found by a scan of the shard. Scans are spread over inserts so that their cost per insert
//     stays constant (at least half a shard's capacity of inserts apart,
//     backing off to four capacities while they find nothing), so a live
//     entry may go while an expired one waits for the next scan.
//  2. A live entry of the scope holding the most evictable entries (all
//     but its claims in progress) in the shard, so that a flooding scope
//     evicts its own entries first: its least recently used entry of the
//     probation segment (entries written by SetNX and never rewritten),
//     and only while that is empty, of the protected segment (entries
//     rewritten by CompareAndSwap: completed records, in the engine's
//     use).
//  3. Nothing else: if only claims in progress are left, the write fails
//     with ErrFull (see above).
//
// A CompareAndSwap that grows an entry past the byte budget makes room in
// the same order, never evicting the entry it rewrote. Get, SetNX on a
// present key and CompareAndSwap mark an entry recently used. A write
// that would fail with ErrFull is refused before it evicts anything.
//
// Evicting a live entry weakens duplicate protection for its key: a
// forgotten record lets a retry run again, a forgotten Guard window lets
// a duplicate through (a forgotten token is refused as unknown). The
// Store counts such evictions (Evictions) and reports each one
// (WithOnEvict); size it so they stay rare. Reclaiming an expired entry
// and deleting one are not evictions.
//
// # Scopes
//
// A key's scope is the principal, tenant or user that owns it, as the
// engine's key layout names it (see idemkit.ScopeOf; "" for other keys,
// which share one scope). Scopes make eviction fair, as above, without
// any option. WithScopeQuota(n, scopeOf) also caps every scope (as
// scopeOf names it) at n entries: a write to a scope holding n entries
// first frees one of that scope's own, in the eviction order above
// applied to the scope's entries alone, so a flooding scope evicts its
// own entries, never another's, and is refused with ErrFull once its n
// entries are all claims in progress. Keys whose scope is "" have no
// quota. For the keys the engine writes, use idemkit.ScopeOf as scopeOf
// (the mem:// URL's scope_quota does).
//
// Without a quota, keys are spread over the shards by key, so every
// scope's entries spread evenly and the fullest scope of a shard is, in
// proportion, the fullest of the Store. With a quota, all entries of a
// scope live in one shard, chosen by the scope, so that the quota is kept
// under that shard's lock alone. Shards then fill unevenly, and the
// scopes sharing a shard still compete for its capacity and bytes under
// the eviction order: quotas isolate scopes fully while the active scopes
// of a shard, at their quotas, fit in it. Size the capacity at several
// times the number of active scopes times n.
//
// # Expiry
//
// Expiry is lazy: every operation treats an expired entry as absent and
// reclaims it. An optional janitor goroutine (WithSweepInterval) also
// reclaims expired entries nobody touches. Times come from the monotonic
// clock, so wall-clock jumps do not shorten or lengthen TTLs.
//
// # Options
//
// New rejects an invalid option, or options that no shard layout can
// honour, with an error wrapping store.ErrInvalid: no option is clamped
// or ignored. Leave an option out to get its default.
package memstore
