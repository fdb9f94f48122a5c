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
// store to the test. Each case logs a line starting with RESULT: the
// histories checked, operations, unknown outcomes and faults injected.
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
// # Short and long runs
//
// By default each store and fault gets two histories of 1.5 seconds, four
// clients and three keys (go test ./internal/linear, about 75 seconds). The
// long version records histories of five seconds, six clients and four
// keys, for the time IDEMKIT_LINEAR_LONG names per store and fault:
//
//	IDEMKIT_LINEAR_LONG=2m go test -timeout 2h -v ./internal/linear
//
// runs each of the 22 cases for about two minutes (about 45 minutes in
// all). The SQL tests take their servers' administrative DSNs from
// IDEMKIT_TEST_POSTGRES_DSN and IDEMKIT_TEST_MYSQL_DSN, as store/sqlstore's
// tests do.
package linear
