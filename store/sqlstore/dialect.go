package sqlstore

import (
	"fmt"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/store"
)

// Dialect selects the SQL a Store speaks: Postgres or MySQL. The zero
// Dialect is invalid.
type Dialect struct{ d *dialect }

// The supported dialects.
var (
	// Postgres is PostgreSQL 12 or later (and wire-compatible servers
	// that implement INSERT ... ON CONFLICT and data-modifying CTEs).
	Postgres = Dialect{&postgres}
	// MySQL is MySQL 8 or MariaDB 10.3 or later, InnoDB tables. On MariaDB
	// 10.5 or later the Store's SetNX uses INSERT ... RETURNING, and
	// Consume DELETE ... RETURNING.
	MySQL = Dialect{&mysql}
)

// String returns the dialect's name: "postgres" or "mysql".
func (d Dialect) String() string {
	if d.d == nil {
		return "invalid"
	}
	return d.d.name
}

// dialect holds the statement templates of one SQL dialect. In each
// template, T stands for the quoted table name and NOW for the database's
// clock as read once per statement.
type dialect struct {
	name   string
	quote  func(ident string) string
	schema []string // CREATE statements, T for the table, I for the index
	// statement templates; see queries
	get, setnx, setnxAsync, upsert, upsertRow, lockRow, insert, reclaim, cas, cad, consume, consumeRead, consumeRev, sweep, sweepLock, sweepDelete, scan, scanBounded string
	// SetNXBatch's statements: PostgreSQL's, over arrays, for any number
	// of keys; MySQL's, templates that batchQueries repeats to n rows.
	setnxBatch, setnxBatchAsync                   string
	batchRow, upsertBatch, insertBatch, readBatch string
}

// DefaultTable is the table a Store uses unless WithTable says otherwise.
const DefaultTable = "idemkit_store"

// Postgres keeps remaining TTLs exact with microsecond timestamps, and reads
// the clock with statement_timestamp(): the start of the current statement,
// on the server, constant within it, and (unlike now()) moving on inside a
// long transaction.
var postgres = dialect{
	name:  "postgres",
	quote: func(s string) string { return `"` + s + `"` },
	schema: []string{
		`CREATE TABLE IF NOT EXISTS T (
	idem_key   bytea       NOT NULL PRIMARY KEY,
	idem_value bytea       NOT NULL,
	expires_at timestamptz NOT NULL
)`,
		`CREATE INDEX IF NOT EXISTS I ON T (expires_at)`,
	},
	get:         `SELECT idem_value, ` + pgTTL + ` FROM T WHERE idem_key = $1 AND expires_at > statement_timestamp()`,
	scan:        `SELECT idem_key, idem_value, ` + pgTTL + ` FROM T WHERE idem_key >= $1 AND expires_at > statement_timestamp() ORDER BY idem_key LIMIT 500`,
	scanBounded: `SELECT idem_key, idem_value, ` + pgTTL + ` FROM T WHERE idem_key >= $1 AND idem_key < $2 AND expires_at > statement_timestamp() ORDER BY idem_key LIMIT 500`,
	setnx:       strings.Replace(pgSetNX, " ASYNC", "", 1),
	// The same, which also sets synchronous_commit to off for its own
	// transaction (set_config's is_local): the implicit transaction of the
	// autocommit statement, or a SetNXBatch's.
	setnxAsync: strings.Replace(pgSetNX, " ASYNC", " AND set_config('synchronous_commit', 'off', true) = 'off'", 1),
	cas: `UPDATE T SET idem_value = $3, expires_at = statement_timestamp() + $4::bigint * interval '1 millisecond'
WHERE idem_key = $1 AND idem_value = $2 AND expires_at > statement_timestamp()`,
	cad:     `DELETE FROM T WHERE idem_key = $1 AND idem_value = $2 AND expires_at > statement_timestamp()`,
	consume: `DELETE FROM T WHERE idem_key = $1 AND expires_at > statement_timestamp() RETURNING idem_value`,
	// Locks a batch of expired rows, skipping rows live traffic holds,
	// and deletes them.
	sweep: `DELETE FROM T WHERE idem_key IN (
	SELECT idem_key FROM T WHERE expires_at <= statement_timestamp() LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= statement_timestamp()`,
	setnxBatch:      strings.Replace(pgSetNXBatch, " ASYNC", "", 1),
	setnxBatchAsync: strings.Replace(pgSetNXBatch, " ASYNC", " AND set_config('synchronous_commit', 'off', true) = 'off'", 1),
}

// pgSetNXBatch is PostgreSQL's SetNXBatch, one statement: pgSetNX over
// the rows of three arrays ($1 keys, $2 values, $3 TTLs in milliseconds),
// which hold distinct keys in ascending order, inserted in that order so
// that overlapping batches lock their rows in the same order. It returns
// a row per key it set (true) or found live (false, with the value and
// remaining TTL); a key with neither was claimed by a concurrent writer
// that committed after the statement's snapshot, and needs another
// statement.
const pgSetNXBatch = `WITH b AS (
	SELECT k, v, ms, n FROM unnest($1::bytea[], $2::bytea[], $3::bigint[]) WITH ORDINALITY AS b(k, v, ms, n)
), cur AS (
	SELECT idem_key, idem_value, expires_at FROM T WHERE idem_key = ANY($1::bytea[]) AND expires_at > statement_timestamp()
), ins AS (
	INSERT INTO T AS t (idem_key, idem_value, expires_at)
	SELECT k, v, statement_timestamp() + ms * interval '1 millisecond' FROM b
	WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.idem_key = b.k) ASYNC
	ORDER BY n
	ON CONFLICT (idem_key) DO UPDATE SET idem_value = EXCLUDED.idem_value, expires_at = EXCLUDED.expires_at
	WHERE t.expires_at <= statement_timestamp()
	RETURNING idem_key
)
SELECT idem_key, true, NULL::bytea, 0::bigint FROM ins
UNION ALL
SELECT idem_key, false, idem_value, ` + pgTTL + ` FROM cur`

// pgSetNX is PostgreSQL's SetNX, one statement: read a live row; only
// when there is none, insert, or replace an expired row. A row committed by a concurrent claim after
// this statement's snapshot makes the insert conflict and return
// nothing while cur is empty too: the caller then runs it again.
const pgSetNX = `WITH cur AS (
	SELECT idem_value, expires_at FROM T WHERE idem_key = $1 AND expires_at > statement_timestamp()
), ins AS (
	INSERT INTO T AS t (idem_key, idem_value, expires_at)
	SELECT $1, $2, statement_timestamp() + $3::bigint * interval '1 millisecond'
	WHERE NOT EXISTS (SELECT 1 FROM cur) ASYNC
	ON CONFLICT (idem_key) DO UPDATE SET idem_value = EXCLUDED.idem_value, expires_at = EXCLUDED.expires_at
	WHERE t.expires_at <= statement_timestamp()
	RETURNING 1
)
SELECT true, NULL::bytea, 0::bigint FROM ins
UNION ALL
SELECT false, idem_value, ` + pgTTL + ` FROM cur`

// pgTTL is the remaining TTL of a live row in whole milliseconds, rounded
// up so that a row's first reading is exactly the TTL it was set with.
const pgTTL = `ceil(extract(epoch FROM expires_at - statement_timestamp()) * 1000)::bigint`

// MySQL reads UTC_TIMESTAMP(6), which the server evaluates once per
// statement and which, unlike NOW(), does not depend on the session's
// time_zone. rev changes on every write, so that an UPDATE's affected-row
// count is the matched-row count whatever the client's found-rows flag,
// and a Consume without RETURNING can delete exactly the version it read.
var mysql = dialect{
	name:  "mysql",
	quote: func(s string) string { return "`" + s + "`" },
	schema: []string{
		`CREATE TABLE IF NOT EXISTS T (
	idem_key   VARBINARY(512) NOT NULL PRIMARY KEY,
	idem_value LONGBLOB       NOT NULL,
	expires_at DATETIME(6)    NOT NULL,
	rev        BIGINT         NOT NULL DEFAULT 0,
	INDEX I (expires_at)
) ENGINE=InnoDB`,
	},
	get:         `SELECT idem_value, ` + myTTL + ` FROM T WHERE idem_key = ? AND expires_at > UTC_TIMESTAMP(6)`,
	scan:        `SELECT idem_key, idem_value, ` + myTTL + ` FROM T WHERE idem_key >= ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY idem_key LIMIT 500`,
	scanBounded: `SELECT idem_key, idem_value, ` + myTTL + ` FROM T WHERE idem_key >= ? AND idem_key < ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY idem_key LIMIT 500`,
	// MariaDB 10.5 or later: the Store's SetNX in one statement. The assignments
	// run in order, each seeing the ones before, so expires_at, which the
	// others test, comes last.
	upsert: myUpsert + "\nRETURNING rev, idem_value, " + myTTL,
	// A View's SetNX on MySQL: upsert without RETURNING, which takes the
	// key's row exclusively at once, then a read of the row it left
	// (lockRow, under the lock the upsert took).
	upsertRow: myUpsert,
	lockRow:   `SELECT rev, idem_value, ` + myTTL + ` FROM T WHERE idem_key = ? FOR UPDATE`,
	insert:    `INSERT IGNORE INTO T (idem_key, idem_value, expires_at, rev) VALUES (?, ?, ` + myExpiry + `, 0)`,
	reclaim: `UPDATE T SET idem_value = ?, expires_at = ` + myExpiry + `, rev = rev + 1
WHERE idem_key = ? AND expires_at <= UTC_TIMESTAMP(6)`,
	cas: `UPDATE T SET idem_value = ?, expires_at = ` + myExpiry + `, rev = rev + 1
WHERE idem_key = ? AND idem_value = ? AND expires_at > UTC_TIMESTAMP(6)`,
	cad:         `DELETE FROM T WHERE idem_key = ? AND idem_value = ? AND expires_at > UTC_TIMESTAMP(6)`,
	consume:     `DELETE FROM T WHERE idem_key = ? AND expires_at > UTC_TIMESTAMP(6) RETURNING idem_value`,
	consumeRead: `SELECT idem_value, rev FROM T WHERE idem_key = ? AND expires_at > UTC_TIMESTAMP(6)`,
	consumeRev:  `DELETE FROM T WHERE idem_key = ? AND rev = ? AND expires_at > UTC_TIMESTAMP(6)`,
	// The sweeper locks a batch of expired rows, skipping rows live
	// traffic holds (MySQL 8.0.1, MariaDB 10.6), then deletes them by key;
	// older servers fall back to DELETE ... LIMIT.
	sweepLock:   `SELECT idem_key FROM T WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT ? FOR UPDATE SKIP LOCKED`,
	sweepDelete: `DELETE FROM T WHERE idem_key = ?`, // a row the sweeper holds: still expired
	sweep:       `DELETE FROM T WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT ?`,
	// SetNXBatch: one multi-row INSERT ... ON DUPLICATE KEY UPDATE of
	// upsert's assignments, with RETURNING on MariaDB 10.5 or later;
	// without it, followed in the same transaction by a read of the keys
	// (readBatch), which sees the rows the INSERT left and still holds
	// locked (see View.myBatch). ROWS and KEYS stand for batchRow
	// and ? repeated.
	batchRow:    `(?, ?, ` + myExpiry + `, ?)`,
	insertBatch: myInsertBatch,
	upsertBatch: myInsertBatch + "\nRETURNING idem_key, rev, idem_value, " + myTTL,
	readBatch:   `SELECT idem_key, rev, idem_value, ` + myTTL + ` FROM T WHERE idem_key IN (KEYS)`,
}

// myUpsert inserts a row, or replaces an expired one, or leaves a live one
// as it is; its revision tells which (see View.myUpsert). On a duplicate
// key it takes the row's exclusive lock at once, where INSERT IGNORE takes
// a shared one: two transactions that each hold the shared lock and then
// ask for the exclusive one deadlock.
const myUpsert = `INSERT INTO T (idem_key, idem_value, expires_at, rev) VALUES (?, ?, ` + myExpiry + `, ?)
ON DUPLICATE KEY UPDATE
	rev = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(rev), rev),
	idem_value = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(idem_value), idem_value),
	expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`

// myInsertBatch is upsert's INSERT for the rows ROWS, without RETURNING.
const myInsertBatch = `INSERT INTO T (idem_key, idem_value, expires_at, rev) VALUES ROWS
ON DUPLICATE KEY UPDATE
	rev = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(rev), rev),
	idem_value = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(idem_value), idem_value),
	expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`

const (
	// myExpiry is the expiry of a row written now with a TTL given in
	// microseconds.
	myExpiry = `UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND`
	// myTTL is the remaining TTL of a live row in whole milliseconds,
	// rounded up, as of when it is read: UTC_TIMESTAMP(6) is the
	// statement's start, and a statement that waited on the row's lock
	// would otherwise report the wait on top of the TTL the lock holder
	// wrote. The time since the start (SYSDATE(6) - NOW(6), both in the
	// session's time zone) is taken off.
	myTTL = `CAST(CEIL((TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) - TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6))) / 1000) AS SIGNED)`
)

// queries are a dialect's statements with the table name filled in.
type queries struct {
	*dialect          // a copy with the table name filled in
	base     *dialect // Postgres.d or MySQL.d
	table    string   // quoted
	// MySQL's locking read for a View's Consume: it reads the latest
	// committed row whatever the transaction's isolation level, and locks
	// it.
	consumeLock string
	// MySQL's SetNXBatch statements by number of rows (see batchQueries).
	batchMu sync.Mutex
	batch   map[int]*myBatch
}

func newQueries(d *dialect, table string) *queries {
	q := &queries{dialect: d, base: d, table: quoteTable(d, table)}
	c := *d
	for _, s := range []*string{&c.setnxBatch, &c.setnxBatchAsync, &c.upsertBatch, &c.insertBatch, &c.readBatch, &c.get, &c.setnx, &c.setnxAsync, &c.upsert, &c.upsertRow, &c.lockRow, &c.insert, &c.reclaim, &c.cas, &c.cad, &c.consume, &c.consumeRead, &c.consumeRev, &c.sweep, &c.sweepLock, &c.sweepDelete, &c.scan, &c.scanBounded} {
		*s = q.fill(*s)
	}
	q.dialect = &c
	if d == &mysql {
		q.consumeLock = c.consumeRead + " FOR UPDATE"
	}
	return q
}

// myBatchMax is the most rows one MySQL SetNXBatch statement claims: a
// larger batch runs as statements of myBatchMax rows (4 placeholders a row,
// far below the protocol's 65,535).
const myBatchMax = 512

// myBatch holds MySQL's SetNXBatch statements for one number of rows.
type myBatch struct{ upsert, insert, read, readShared string }

// batchQueries returns MySQL's SetNXBatch statements for n rows, n a power
// of two at most myBatchMax, so that a Store prepares at most
// 4*(log2(myBatchMax)+1) of them (per pooled connection).
func (q *queries) batchQueries(n int) *myBatch {
	q.batchMu.Lock()
	defer q.batchMu.Unlock()
	if b, ok := q.batch[n]; ok {
		return b
	}
	rows := strings.TrimSuffix(strings.Repeat(q.batchRow+", ", n), ", ")
	keys := strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
	b := &myBatch{
		upsert: strings.Replace(q.upsertBatch, "ROWS", rows, 1),
		insert: strings.Replace(q.insertBatch, "ROWS", rows, 1),
		read:   strings.Replace(q.readBatch, "KEYS", keys, 1),
	}
	b.readShared = b.read + " LOCK IN SHARE MODE"
	if q.batch == nil {
		q.batch = map[int]*myBatch{}
	}
	q.batch[n] = b
	return b
}

// mysqlSkipLocked reports whether a MySQL-dialect server, by its
// version, supports SELECT ... FOR UPDATE SKIP LOCKED.
func mysqlSkipLocked(version string) bool {
	if strings.Contains(version, "MariaDB") {
		return mariaDBAtLeast(version, 10, 6)
	}
	var ma, mi, patch int
	if _, err := fmt.Sscanf(version, "%d.%d.%d", &ma, &mi, &patch); err != nil {
		return false
	}
	return ma > 8 || ma == 8 && (mi > 0 || patch >= 1)
}

// mariaDBAtLeast reports whether version, as SELECT VERSION() returns it,
// names MariaDB major.minor or later.
func mariaDBAtLeast(version string, major, minor int) bool {
	if !strings.Contains(version, "MariaDB") {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// fill replaces the placeholder T with the table name. Templates use T
// only as a whole word.
func (q *queries) fill(tmpl string) string {
	return strings.NewReplacer(" T ", " "+q.table+" ", " T\n", " "+q.table+"\n").Replace(tmpl)
}

// quoteTable quotes each dot-separated part of a validated table name.
func quoteTable(d *dialect, table string) string {
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = d.quote(p)
	}
	return strings.Join(parts, ".")
}

// checkTable reports whether table is an identifier, optionally qualified
// by a schema: ASCII letters, digits and underscores, not starting with a
// digit, at most 63 bytes a part (PostgreSQL's limit; MySQL allows 64).
// Its error wraps store.ErrInvalid.
func checkTable(table string) error {
	if err := tableError(table); err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	return nil
}

// tableError is checkTable's error, not yet wrapping store.ErrInvalid.
func tableError(table string) error {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return fmt.Errorf("table name %q has more than one dot", table)
	}
	for _, p := range parts {
		if !isIdent(p) {
			return fmt.Errorf("table name %q: want [schema.]name with ASCII letters, digits and underscores, not starting with a digit, at most 63 bytes a part", table)
		}
	}
	return nil
}

func isIdent(s string) bool {
	if s == "" || len(s) > 63 || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// indexName is the name of the expiry index of table: its last part with
// "_expires_at" appended, shortened to fit 63 bytes.
func indexName(table string) string {
	name := table[strings.LastIndex(table, ".")+1:]
	const suffix = "_expires_at"
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// Schema returns the statements that create table for d, in order, for
// migration tools: the table and its expiry index. They are idempotent
// (IF NOT EXISTS). It returns an error wrapping store.ErrInvalid for an
// invalid dialect or table name.
func Schema(d Dialect, table string) ([]string, error) {
	if d.d == nil {
		return nil, fmt.Errorf("%w: invalid dialect", store.ErrInvalid)
	}
	if err := checkTable(table); err != nil {
		return nil, err
	}
	q := &queries{dialect: d.d, table: quoteTable(d.d, table)}
	out := make([]string, len(d.d.schema))
	for i, s := range d.d.schema {
		s = strings.Replace(q.fill(s), " I ", " "+d.d.quote(indexName(table))+" ", 1)
		out[i] = s
	}
	return out, nil
}
