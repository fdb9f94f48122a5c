// Package memstore is a bounded, in-process store.Store.
//
// A Store keeps at most a fixed number of entries (100,000 by default) in
// memory, split across independently locked shards so that operations on
// different keys rarely contend. Each shard is a least-recently-used list
// (github.com/hashicorp/golang-lru/v2/simplelru). When a shard is full, a
// new key takes the place of an expired entry if the shard finds one (its
// least recently used entry, or any found by a scan made at most once per
// half a shard's worth of inserts, less often while scans find nothing),
// and otherwise pushes out the shard's
// least recently used entry. Pushing out an entry that has not expired
// weakens duplicate protection for that key, so the store counts such
// evictions (Evictions) and can report each one (WithOnEvict); size the
// store so they stay rare.
//
// Expiry is lazy: every operation treats an expired entry as absent and
// reclaims it. An optional janitor goroutine (WithSweepInterval) also
// reclaims expired entries nobody touches. Times come from the monotonic
// clock, so wall-clock jumps do not shorten or lengthen TTLs.
//
// A Store is safe for concurrent use. Its data lives only as long as the
// process, and it protects only callers in that process: use it for a
// single instance, for tests, or as a near cache, not to deduplicate across
// replicas.
package memstore
