// Package boltstore is an embedded, durable, single-node store.Store kept in
// one bbolt (go.etcd.io/bbolt) file. It needs no server, survives process
// restarts and crashes, and is the default store of idemkit's demo program.
//
// # Choosing it
//
// Use boltstore when one process on one machine handles the requests that
// must be deduplicated. bbolt takes an exclusive lock on its file for as
// long as it is open, so a second process (or a second Open in the same
// process) cannot use the same file: Open fails with an error wrapping
// ErrLocked after WithOpenTimeout (default 1s) instead of waiting forever.
// Several processes or machines that must see each other's claims need a
// shared store such as Redis.
//
// # Options
//
// Open and New check every option before they do anything: an option
// given an invalid argument (a non-positive duration or count, an empty
// bucket name, a nil clock), two options that contradict each other, or
// an option New cannot apply (the DB's settings are the caller's) makes
// them fail with an error wrapping store.ErrInvalid that names the
// option. No option is clamped or ignored.
//
// # Durability
//
// By default every commit is flushed to stable storage (fdatasync) before
// any caller in it is answered, so an acknowledged write survives a process
// crash, an operating-system crash and a power failure. WithNoSync skips
// the flush: an acknowledged write still survives a crash of the process
// (the data is in the operating system's page cache), but an
// operating-system crash or power failure may lose recent acknowledged
// writes and, as bbolt warns, may leave the file corrupt.
//
// # Group commit
//
// Writes (SetNX, SetNXBatch, CompareAndSwap, CompareAndDelete, Consume)
// are handed to one committer goroutine, which applies everything queued
// (up to MaxBatch operations), in order, in one bbolt read-write
// transaction and commits it with one flush; then it answers every caller
// and starts the next transaction at once with what queued meanwhile.
// Each operation is still atomic and sees the effects of the operations
// before it, so of two SetNX on one key in one transaction exactly one
// wins. One operation's own error (a corrupt entry, say) is that caller's
// alone and does not fail the others. Answers come from the transaction
// that committed; when a commit fails (a disk error), every caller in it
// gets an error wrapping store.ErrUnavailable. A transaction in which no
// operation changed anything (a losing SetNX, a failed compare) is rolled
// back rather than committed, so it costs no flush. When the committer is
// idle and nothing is queued, a caller runs its own transaction directly,
// which spares a lone caller the hand-off to the committer; the semantics
// are the same. Get runs in its own read-only transaction, concurrently
// with writers.
//
// A caller whose ctx is done before its operation is taken gets ctx's
// error and the operation never runs. Once taken, the operation runs and
// commits regardless; a caller still waiting gets its real answer, and a
// caller whose ctx ends first gets ctx's error (wrapping
// store.ErrUnavailable too), which then means the outcome is unknown. A
// caller running its own transaction directly waits for it to finish.
//
// # Batch claims
//
// SetNXBatch (store.Batcher) claims many keys as one operation of the
// committer: one transaction and one flush for the whole batch, instead of
// one flush per SetNX when the claims come one after another. Items are
// validated first: an invalid one fails the call with store.ErrInvalid
// before anything is written, naming the item by its position. The items
// are then claimed in input order, each as SetNX would, so a key that
// appears twice is set by its first occurrence and seen as existing by
// the later ones. An item that cannot be claimed (a corrupt entry) fails
// the whole call: the batch's puts are undone and the other operations
// of the transaction go on. A batch holds the write transaction while it
// runs, so very large batches delay other writers.
//
// # Expiry and the clock
//
// Each entry is stored with its absolute expiry time in Unix milliseconds,
// taken from this machine's wall clock (time.Now) at the time of the
// write; reported TTLs are the whole milliseconds left on that clock,
// always positive. An expired entry is absent for every operation at once.
// Stepping the wall clock forward expires entries early and stepping it
// back keeps them longer.
//
// A background sweeper (every WithSweepInterval, default 1m; none with
// WithoutSweeper) reclaims the space of expired entries; Sweep runs one
// pass on demand. A pass alternates a read-only scan for expired keys with
// a write, through the committer, that deletes at most WithSweepBatch of
// them after checking each is still expired, so it never holds the write
// lock for long and other writers run in between.
//
// # Stored format
//
// A stored value is a format byte (1), the expiry as a big-endian int64 of
// Unix milliseconds, then the value's bytes. A value that does not decode
// (too short, unknown format byte) makes an operation on that key return
// an error wrapping store.ErrCorrupt, and so does Len; the sweeper leaves
// such values alone and the other keys are unaffected.
//
// # Damaged files
//
// bbolt itself panics when it meets a damaged page (a torn write after a
// power failure under WithNoSync, a bad disk); the Store turns such a
// panic into an error wrapping store.ErrCorrupt instead of letting it
// kill the process from the committer or the sweeper. A write transaction
// in which that happens is rolled back, and the other callers in it get
// store.ErrUnavailable. A file bbolt finds damaged while opening makes
// Open fail with store.ErrCorrupt; the file then stays locked by this
// process (bbolt's memory map of it cannot be released), so move it aside
// and open a new file at the same path to start afresh.
//
// # Keys in errors
//
// Keys may hold secrets (tokens, principals), so no error text shows one:
// an error about a key identifies it as "key sha256:" followed by the
// first 12 hex digits of the key's SHA-256, which a caller can compute
// from a key it knows to find the entry. Hex runs in the text of a bbolt
// panic, which may be key bytes, are redacted too.
//
// All methods of Store are safe for concurrent use.
package boltstore
