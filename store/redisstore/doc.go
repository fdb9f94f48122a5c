// Package redisstore is a store.Store kept in Redis, through a go-redis
// (github.com/redis/go-redis/v9) client the caller creates and owns:
// standalone (redis.NewClient), Sentinel (redis.NewFailoverClient) or
// Redis Cluster (redis.NewClusterClient), or whatever
// redis.NewUniversalClient returns.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	s, err := redisstore.New(rdb, redisstore.WithPrefix("app1:")) // keys: app1:idem:i:<scope>:<key>
//
// The engine names its keys under its own namespace ("idem:" by default),
// so a prefix is needed only to keep applications sharing one Redis apart;
// WithPrefix("idem:") would give idem:idem:i:... keys.
//
// # Atomicity and round trips
//
// Every operation is one network round trip touching exactly one key, so
// Redis runs it atomically and a cluster accepts it whatever the key. How
// depends on the server, which a Store asks once, at its first operation
// (INFO server, on every master of a cluster; one more round trip):
//
//   - Redis 7.0 and later: SetNX sends SET key value NX PX ttl GET and
//     PTTL key in one MULTI/EXEC transaction, so that the TTL it reports
//     is that of the value it returns; Get sends GET and PTTL the same
//     way. SetNXValue (store.SetNXValuer), which the engine's Do uses,
//     sends SET key value NX PX ttl GET alone, also with
//     WithWaitReplicas.
//   - Redis 8.4 and later: CompareAndSwap sends SET key new IFEQ old PX
//     ttl and CompareAndDelete sends DELEX key IFEQ old.
//   - Otherwise (Redis 6.2; SetNX with WithWaitReplicas; a server that
//     refuses INFO) the operation runs as a Lua script.
//   - Consume is one GETDEL everywhere.
//
// A server that refuses the command form chosen (after a failover to an
// older server) gets the script in the same call, and the Store asks the
// server again at its next operation. A server without MULTI (a proxy
// without transactions, MULTI renamed away) gets the scripts from then
// on; the call that found out fails, since the commands it sent after
// MULTI ran outside a transaction.
//
// Scripts run with EVALSHA; when a server does not have a script cached
// (first use, restart, failover, SCRIPT FLUSH) that call costs a second
// round trip (NOSCRIPT, then EVAL) once. Store.LoadScripts preloads them.
//
// TTLs are kept by Redis (SET PX) at millisecond resolution; reported TTLs
// come from PTTL, read in the same atomic step as the value. Redis 6.2 or
// later is required.
//
// # Errors
//
// Connection failures (refused, reset, i/o timeouts), a pool timeout, a
// closed client, and the replies LOADING, READONLY, MASTERDOWN,
// CLUSTERDOWN, TRYAGAIN, OOM, NOREPLICAS, MISCONF, BUSY and max-clients
// return errors wrapping store.ErrUnavailable, with the go-redis error
// kept in the chain; before Redis 7.0 a script reports these as
// "ERR Error running script ...: -CODE ...", which is recognised too. A
// done ctx returns an error wrapping ctx.Err() (and store.ErrUnavailable
// for a passed deadline), also when the socket deadline that
// ContextTimeoutEnabled derives from ctx fires before ctx's own timer. A key holding a non-string
// value (WRONGTYPE) or a value without an expiry, which a Store never
// writes, returns an error wrapping store.ErrCorrupt. Other error replies
// (NOPERM, authentication) are returned wrapped, as they are: they are
// configuration errors, not outages.
//
// Errors never contain a key or a value, which may hold secrets (a
// caller's key, a token): an error about one key names it as "key " and
// the first 12 hex digits of the SHA-256 of the key as Redis holds it
// (prefix included), so an operator can find it by hashing the names that
// SCAN returns.
//
// # Client settings that matter
//
//   - go-redis bounds a command by the client's ReadTimeout and
//     WriteTimeout (5 s by default) and, only when ContextTimeoutEnabled is
//     true, by ctx's deadline as well. Set ContextTimeoutEnabled so that a
//     caller's deadline bounds a call to an unresponsive server.
//   - go-redis retries a command whose connection failed (MaxRetries, 3
//     by default). A retried write may already have been applied by the
//     lost attempt: a SetNX retried after its reply was lost reports
//     set == false with the caller's own value as the existing entry, and
//     a retried CompareAndDelete or Consume reports that nothing matched.
//     The engine's unique claim values make the first case recognisable;
//     set MaxRetries to -1 to rule all of them out.
//
// # Replication, failover and WAIT
//
// Redis replicates asynchronously: a write acknowledged by a primary that
// fails before its replicas copied it is lost when a replica is promoted
// (by Sentinel or the cluster), and a claim can then be won twice.
// WithWaitReplicas narrows that window by waiting, with WAIT, until n
// replicas confirm each write; it makes writes slower and, when replicas
// lag, reports ErrNotReplicated although the write happened on the
// primary. WAIT does not make Redis strongly consistent: it narrows, but
// does not close, the window in which a failover to a replica loses a
// write that was acknowledged.
//
// WAIT is sent in the same pipeline as the operation, on the same
// connection, so an operation stays one network round trip but returns
// only when the replicas answer or the timeout passes. A write that
// changed nothing still carries its WAIT, which returns at once unless
// earlier writes on that connection are still unconfirmed. The timeout
// must be below the client's ReadTimeout (5 s by default), since the
// reply to WAIT is read under it; New checks this.
//
// On a cluster the pipeline goes to the master that holds the key, per
// the client's slot map; if that map is stale (a slot moved), the node
// answers MOVED, nothing is written, the operation fails with
// store.ErrUnavailable and the client reloads its map for the next one.
//
// # Eviction
//
// A key evicted under memory pressure is a claim forgotten. Run Redis with
// maxmemory-policy noeviction; Store.CheckEvictionPolicy rejects the
// allkeys-* policies at startup.
//
// # Cluster
//
// Keys are spread over the slots of a cluster by their hash. WithPrefix
// namespaces keys; a prefix holding a hash tag ("{...}") pins every key
// to one slot. Redirections (MOVED, ASK) are followed by the
// ClusterClient.
package redisstore
