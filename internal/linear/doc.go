// Package linear checks that every store is linearizable, per key, under
// faults: concurrent clients issue random operations of the store.Store
// contract, every operation's invocation, response and outcome is
// recorded, and the history is checked against a sequential model with
// porcupine (github.com/anishathalye/porcupine), the Go linearizability
// checker.
//
// # The model
//
// Model is the sequential specification of one key: absent, or present
// with a value. SetNX stores its value only when the key is absent and
// otherwise reports the value held; Get reads; CompareAndSwap and
// CompareAndDelete act only when the value held equals the compared one;
// Consume deletes and returns the value held. A SetNXBatch call is
// recorded as one SetNX per item, each within the batch's interval: the
// contract makes every item atomic on its key, not the batch as a whole.
// Every operation touches one key, so the model is partitioned by key
// (porcupine's Model.Partition): a history is linearizable if and only if
// every key's history is.
//
// # The engine model
//
// EngineModel checks the engine's claim of a key (idemkit's Begin, then
// Complete) as a model of "at most one owner at a time, with increasing
// fencing tokens". RunEngine records, per key, these observations: a Begin
// that admitted a claim with token t (Admit), one that replayed the recorded
// result (Replay), one that returned ErrInProgress (Busy), one whose outcome
// is unknown (BeginFailed: it may have claimed the key, with a token nobody
// learnt), and a Complete of the claim with token t, which recorded its result,
// returned ErrLeaseLost, or has an unknown outcome. The state of a key is the
// highest token admitted (h), whether the claim with token h still holds the
// key (held), and whether a result is recorded (done):
//
//   - Admit(t) is legal when !done and t > h, and leaves h = t, held;
//   - Replay is legal when done, Busy when !done;
//   - BeginFailed is always legal, and leaves held false;
//   - Complete(t) ok is legal when held, h = t and !done, and leaves done;
//   - Complete(t) lease lost is legal when not (held, h = t and !done);
//   - Complete(t) unknown is always legal, and leaves done when the claim
//     held the key (it may have landed).
//
// So a completion with token t must be refused when a claim with a larger token
// was admitted before it began (a takeover happened before it), and accepted
// when none was; tokens increase in the order claims are admitted; at most one
// completion per key succeeds, and after it the key only replays. Leases are
// not modelled (the model has no clock): a claim may be taken over at any
// time, which the engine allows once its lease ends. Release is not
// recorded: it returns nothing, and it only ends the claim that calls it,
// which completes nothing afterwards. Clients stall past their lease (a third
// of the claims without a heartbeat, a tenth of those with one, for longer
// than the lease) and then complete, so that stale completions are exercised;
// a slot's key is replaced by a fresh one once a result is recorded for it,
// and one claim in five goes to the slot's previous key, which must replay.
// TestEngineCheckerFindsBlindSwap proves the checker can fail: over a store
// whose CompareAndSwap ignores the compared value, a stalled owner's
// completion overwrites the claim that took its key over, and the history
// must be reported.
//
// # Expiry
//
// Time-based expiry is excluded, not modelled: every entry is written with
// a TTL of an hour (TTL), far longer than any history, so no key expires
// while one is recorded and the model has no clock. Expiry is covered by
// the TTL checks of store/storetest. Entries read back must carry a value
// and a positive TTL (anything else fails the test); one whose remaining
// TTL exceeds the hour it was written with is counted (Stats.LongTTL) and
// logged, not failed.
//
// # Unknown outcomes
//
// An operation that fails with any error other than store.ErrNotFound
// (store.ErrUnavailable, a deadline, a broken connection) may or may not
// have taken effect. It is recorded with an unknown output and a response
// at the end of the history, porcupine's way of saying that it took
// effect at some instant after its call, or never; the model accepts any
// answer for it. A definite answer (not set, not swapped, not found) is a
// normal response. An operation that certainly never reached the store
// (its connection could not be dialled, or the test had no server to
// send it to: ErrNotSent) is left out of the history: it cannot have
// taken effect, and each unknown outcome multiplies the checker's work.
// Clients also back off after an unknown outcome, as real ones do.
//
// # Faults
//
// The tests run over memstore, boltstore, redisstore (a redis-server of
// their own, started by internal/redistest, with appendonly) and sqlstore
// on PostgreSQL and MariaDB (a database of their own, dropped at the end),
// without faults and under faults, each injected at most a few times per
// history for at most a second, on loopback only: network delay, reset
// connections and a blackhole through Proxy, a small TCP fault proxy
// between the client and the server, and lost replies (a delay, then a
// reset of the connections holding the delayed replies); a SIGKILL and
// restart of Redis on the same port and data directory; the killing of every SQL session of
// the test database (pg_terminate_backend, KILL CONNECTION); and a SIGKILL
// and restart of a child process that holds the bbolt file and serves the
// store to the test; server-side statement timeouts (statement_timeout
// and lock_timeout, max_statement_time and innodb_lock_wait_timeout) while
// a session of the test locks the table; SIGSTOP and SIGCONT of client
// processes (the test binary re-executed, each recording its part of the
// history to a file with MarshalOps; Merge joins the parts) past the
// engine's lease; and a Redis Cluster slot-owner failover (CLUSTER
// FAILOVER on the replica of the slot's master, which must lose nothing,
// or CLUSTER FAILOVER TAKEOVER with the replication link cut, which
// loses the writes acknowledged during the cut). Each case logs a line
// starting with RESULT: the histories checked, operations, unknown
// outcomes and faults injected.
// A history that is not linearizable fails the test, and porcupine's
// visualization (an HTML file) is written to a new directory under the
// system's temporary directory, whose path the failure names.
//
// TestCheckerFindsBrokenStores proves the checker can fail: stores broken
// on purpose (a SetNX that wins twice, an acknowledged CompareAndSwap that
// is lost, a Consume that hands a value out twice) must be reported. Two
// more tests must find the anomalies of real setups that the stores'
// documentation warns of: a Redis without persistence that restarts, and
// go-redis's default retries under lost replies.
//
// The engine model runs over memstore, redisstore, sqlstore on PostgreSQL
// and MariaDB, and the bbolt child process, without faults and under
// reset connections, lost replies, the Redis restart, session kills and
// the child's SIGKILL, through Begin and Complete and through Do
// (EngineWorkload.Do) (TestEngine*), and over client processes paused
// with SIGSTOP (TestPausedClientProcesses, EngineWorkload.Paused). TestRedisSentinelFailover kills the primary
// of a Sentinel set-up (a primary, one replica, three sentinels) in the
// middle of a history, with the replication link cut 100ms before the kill
// or not, through a store with WAIT (wait_replicas=1) and one without.
// Without WAIT the writes acknowledged while the link was cut are lost,
// and the case logs their count and the verdict, and keeps the
// visualization. With WAIT no acknowledged write is lost, but WAIT
// confirms writes, not reads: an answer that changed nothing, given by
// the old primary from a write whose WAIT failed, can be contradicted
// after the failover lost that write (the wait-read case builds such a
// history and must find it); a history with WAIT fails the test unless it
// is linearizable once those answers are left out. IllegalKeys and
// Describe show where a history fails. The long
// version also runs the engine model through failovers.
//
// # Short and long runs
//
// By default each store and fault gets two histories of 1.5 seconds, four
// clients and three keys, each engine case one history of two seconds
// (some engine cases run in the long version only), and each Sentinel
// variant with the link cut and the Cluster one failover (go test
// ./internal/linear, about 110 seconds). The
// long version records histories of five seconds, six clients and four
// keys, for the time IDEMKIT_LINEAR_LONG names per store and fault:
//
//	IDEMKIT_LINEAR_LONG=2m go test -timeout 2h -v ./internal/linear
//
// runs each case for about two minutes. The SQL tests take their servers' administrative DSNs from
// IDEMKIT_TEST_POSTGRES_DSN and IDEMKIT_TEST_MYSQL_DSN, as store/sqlstore's
// tests do.
package linear
