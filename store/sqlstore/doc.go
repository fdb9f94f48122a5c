// Package sqlstore is a store.Store over one table of PostgreSQL or
// MySQL/MariaDB, reached through database/sql, whose records can complete
// inside the caller's own database transaction.
//
//	db, _ := sql.Open("pgx", dsn) // import _ "github.com/jackc/pgx/v5/stdlib"
//	s, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithTable("idem"))
//	defer s.Close()
//
// sqlstore imports no driver: the program imports the one it uses
// (github.com/jackc/pgx/v5/stdlib, registered as "pgx", or
// github.com/go-sql-driver/mysql, "mysql"). pgx's native API (pgx.Tx,
// pgxpool.Pool) is adapted by package pgxstore.
//
// # URLs
//
// Importing the package registers three schemes with store.Open:
//
//	postgres://user:password@host:5432/db?sslmode=disable&table=idem   driver "pgx"
//	postgresql://...                                                   the same
//	mysql://user:password@host:3306/db?table=idem                      driver "mysql"
//
// sqlstore reads these parameters and hands every other one to the
// driver, in its DSN form, to judge:
//
//	table=NAME           WithTable(NAME)
//	outbox_table=NAME    WithOutboxTable(NAME)
//	create_table=true    CreateTable on open (and CreateOutbox with outbox_table)
//	max_open=N           at most N connections, N >= 1 (default DefaultURLMaxOpen, 16)
//	max_idle=N           at most N idle connections, 0 to max_open (default max_open)
//	max_lifetime=D       close a connection D after it opened; 0s: never (default 30m)
//	max_idle_time=D      close a connection idle for D; 0s: never (default 5m)
//
// The pool is always bounded: each operation waiting on a row holds a
// connection, and an unbounded pool under a burst opens one per request,
// up to the server's limit, which it shares with every other client
// (PostgreSQL then refuses everyone with "too many clients"). Operations
// beyond max_open wait for a connection, within their context. A value
// that is not a valid bound, a parameter given twice, and a query holding
// a ';' (which Go's URL parser would drop with its pair) are refused with
// store.ErrInvalid before any connection is made. Open fails with
// store.ErrInvalid when the driver is not imported (saying which import
// it needs) and pings the database (store.ErrUnavailable when it does not
// answer). The Store then owns the pool: Close closes it. Passwords never
// appear in errors. A pool given to New keeps the caller's settings.
//
// # Schema
//
// One table (DefaultTable unless WithTable): a binary key as primary key,
// the value, and the expiry instant, indexed for the sweeper. Schema
// returns the statements for a migration tool; CreateTable runs them. On
// MySQL a rev column counts writes (see Round trips). Values up to
// store.MaxValueLen need MySQL's max_allowed_packet above 16MiB plus a
// margin (64MiB, MySQL 8's default; MariaDB's default of 16MiB is short).
//
// # Clocks
//
// Expiry is computed and checked by the database, with its own clock
// (statement_timestamp() on PostgreSQL, UTC_TIMESTAMP(6) on MySQL, both
// read once per statement); the package never reads the process clock.
// Instances whose clocks disagree agree on every key. Remaining TTLs are
// counted in microseconds and reported rounded up to the millisecond.
//
// # Round trips
//
// On PostgreSQL every operation is one statement, one round trip: SetNX
// is a CTE that reads a live row or, only when there is none, inserts or
// replaces an expired row (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE
// expired); when a concurrent claim committed after the statement's
// snapshot it returns nothing and runs again. CompareAndSwap and
// CompareAndDelete are single conditional UPDATE and DELETE statements,
// Consume a DELETE ... RETURNING.
//
// On MariaDB 10.5 or later the Store's SetNX is one statement too, INSERT
// ... ON DUPLICATE KEY UPDATE ... RETURNING: it inserts, or replaces an
// expired row, or leaves a live one, and returns the row it left, marked
// by a random revision when it wrote it. On MySQL, which has no
// RETURNING, each step is one atomic statement and no step relies on an
// earlier read without a condition or a lock: SetNX reads a live row (a
// replay: one round trip), else INSERT IGNORE (a new claim: two), else
// replaces an expired row with a conditional UPDATE (three). A View's
// SetNX takes the key's row exclusively with its first statement, so that
// concurrent claims of one key queue on the row instead of deadlocking: on
// MariaDB 10.5 or later it is the Store's one statement; on MySQL the same
// INSERT ... ON DUPLICATE KEY UPDATE without RETURNING, then a locking
// read of the row's revision (two round trips; one when it replaced an
// expired row). CompareAndSwap and
// CompareAndDelete are one conditional statement. Consume is one DELETE
// ... RETURNING on MariaDB 10.5 or later, and elsewhere a read of the
// row's revision and a DELETE of exactly that revision.
//
// The Store prepares each statement once per connection, so a driver
// without interpolateParams still makes one round trip a statement; on
// MySQL a View on a transaction of the Store's *sql.DB runs the same
// prepared statements on the transaction's connection (a statement the
// Store has not prepared yet runs as text once, and is prepared in the
// background). pgx caches prepared statements on its own.
//
// On PostgreSQL, WithAsyncClaims lets the Store's own claims commit
// without waiting for their WAL flush; see Asynchronous claims for when
// that is safe.
//
// Statements that the server rolls back as deadlock victims run again on
// the Store's own pool (never in a caller's transaction). Connection
// failures, timeouts, lock waits, too many connections and deadlocks wrap
// store.ErrUnavailable. Error texts name keys by a short digest, never by
// their bytes.
//
// # Batches
//
// SetNXBatch claims a batch's distinct keys in ascending order, so that
// overlapping batches never wait on each other in a cycle, with as few
// statements as the server allows:
//
//   - PostgreSQL: one statement (one round trip) for the whole batch,
//     on the Store's own pool or in a View: an INSERT ... SELECT FROM
//     unnest(...) ON CONFLICT DO UPDATE of expired rows, in a CTE that
//     also reads the live rows. Its keys, values and TTLs travel as
//     three arrays (bytea[], bytea[], bigint[]), which pgx encodes from
//     [][]byte and []int64.
//   - MariaDB 10.5 or later: one statement (one round trip) for up to
//     512 distinct keys: a multi-row INSERT ... ON DUPLICATE KEY UPDATE
//     of expired rows ... RETURNING, on the Store's own pool or in a View.
//   - MySQL (and MariaDB under WithoutReturning): the same INSERT
//     without RETURNING, then a SELECT of the keys, in one transaction:
//     four round trips on the Store's own pool (BEGIN, INSERT, SELECT,
//     COMMIT), two in a View.
//
// MySQL statements hold at most 512 keys; a larger batch runs as several,
// each claimed as above. A key that a concurrent claim committed after the
// statement's snapshot (PostgreSQL) or that expired between the INSERT and
// the SELECT (MySQL) costs another statement for the keys concerned, at
// most 16 in all. On the Store's own pool a statement that the server
// picks as a deadlock victim runs again; in a caller's transaction the
// error is returned, since the server rolled the transaction back. A
// batch is not atomic as a whole: every key is.
//
// # Asynchronous claims
//
// WithAsyncClaims makes the Store's own claims (SetNX and SetNXBatch on the
// Store, not through a View) commit without waiting for the server to
// flush them to disk: PostgreSQL's synchronous_commit = off, for the
// claim's statement only. A claim then costs about what a plain INSERT
// costs when its commit does not wait: in the mode "claim outside,
// complete inside" the business transaction's commit is the only one that
// waits, instead of one of two.
//
// What it gives up: a claim acknowledged less than about three times the
// server's wal_writer_delay (200ms by default) before a server crash may
// be lost with it. Nothing is lost by a client crash or a lost connection,
// and the order of commits is kept: a later commit that waits (the
// business transaction's) flushes every earlier claim with it, so a
// completed record never outlives a crash that lost its claim. That makes
// the option safe for the mode "claim outside, complete inside" when every
// effect of the work is in the business transaction: after a crash that
// lost the claim, the owner's completion finds no record of its own and
// its transaction rolls back, and a retry runs the work once. It is not
// safe when the work has effects outside the database (a payment, an
// e-mail) or for dedup windows (idemkit's Guard): there a lost claim lets
// a duplicate run after the server restarts. That is why it is an option
// and not the default.
//
// Completions, releases and every operation through a View keep the
// server's setting. On MySQL, where durability is a server-wide setting
// (innodb_flush_log_at_trx_commit), New fails with store.ErrInvalid.
//
// # Sweeper
//
// Expired rows are absent for every operation from the instant they
// expire; the sweeper reclaims their space. Every sweep interval
// (WithSweepInterval) it deletes expired rows in short transactions of at
// most the sweep batch (WithSweepBatch), locking only rows no one else
// holds (FOR UPDATE SKIP LOCKED; on MySQL before 8.0.1 or MariaDB before
// 10.6, a READ COMMITTED DELETE ... LIMIT). Run one sweeper per table, or
// none (WithoutSweeper) and call Sweep from a job. Close stops it.
//
// # Outbox
//
// A second table (DefaultOutboxTable unless WithOutboxTable; created by
// CreateOutbox or the statements of OutboxSchema) holds events to publish
// after the transaction that writes them commits. View.Enqueue adds one
// through the View's connection, so a rolled-back transaction leaves no
// row; its id, MessageID, is a digest of the operation's scope, key and
// event name, never the key itself. A relay (package queue/idemrelay, a
// module of its own) claims due rows in batches with ClaimOutbox (FOR
// UPDATE SKIP LOCKED where the server has it), publishes them, and
// removes the confirmed ones with OutboxBatch.Finish in the same
// transaction. See docs/outbox.md.
//
// # Transactions
//
// Store.Tx returns a View whose operations run on a caller's *sql.Tx
// (Store.On, on any Conn; pgxstore.View on a pgx.Tx). Its writes commit or
// roll back with the caller's other statements, which gives two ways to
// make a database effect and its idempotency record agree:
//
//   - Claim outside, complete inside: the claim is committed first (a
//     lease, as with any store); the business transaction then completes
//     the record with an owner-checked CompareAndSwap through the View. A
//     stale owner (its lease lost and taken) gets false and rolls back, so
//     it never commits a business write.
//   - All inside one transaction: SetNX through the View claims the key
//     in the business transaction itself. A concurrent duplicate waits on
//     the key's row until that transaction ends, then replays the
//     committed record, or claims the key if it rolled back. A crash rolls
//     everything back, so no lease is needed; each waiting duplicate holds
//     a connection, so bound the wait with its context and the server's
//     lock timeout. In a bounded pool (store.Open's) duplicates beyond its
//     size wait for a connection instead; the transaction that holds the
//     row must not need a second connection of a full pool to end.
//
// In a View on MySQL, SetNX and Consume take the key's row exclusively
// before they read it, with statements that see the latest committed row
// whatever the isolation level: concurrent claims and replays of one key,
// in transactions at READ COMMITTED, REPEATABLE READ (MySQL's default) or
// SERIALIZABLE, wait for each other in turn and never deadlock (an INSERT
// IGNORE's shared lock, then an exclusive one, deadlocked up to a third of
// the replays of a completed key by three concurrent callers). A replay in a View thus
// holds the row until its transaction ends: keep such transactions short,
// as with PostgreSQL, where INSERT ... ON CONFLICT locks the row it finds
// too. On every server a claim
// of a key that another transaction claimed and has not committed waits
// for it. A claim of a key whose completion a transaction has written and
// not committed yet waits for it too, then replays the completed record,
// in a View on MySQL and on the Store on MariaDB 10.5 or later (they lock
// the row they read); elsewhere it answers at once from the last
// committed row (in progress). On MySQL, a statement
// whose context ends may still complete on the server (the driver drops
// the connection; the server is not told to stop): that is why such
// errors wrap store.ErrUnavailable, which concludes nothing.
package sqlstore
