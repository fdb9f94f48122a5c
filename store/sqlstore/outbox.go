package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/store"
)

// DefaultOutboxTable is the outbox table a Store uses unless
// WithOutboxTable says otherwise.
const DefaultOutboxTable = "idemkit_outbox"

// Limits of an outbox message, checked by Enqueue.
const (
	// MaxEventLen is the longest event name, in bytes.
	MaxEventLen = 255
	// MaxSubjectLen is the longest subject (NATS) or routing key (AMQP),
	// in bytes: AMQP's limit for a routing key.
	MaxSubjectLen = 255
	// MaxPayloadLen is the largest payload, in bytes: the largest value
	// the Store keeps. A broker's own limit is usually lower (NATS: 1MiB
	// by default); the relay reports a message over it as a failure and
	// keeps its row.
	MaxPayloadLen = store.MaxValueLen
)

// ErrDuplicateMessage reports an Enqueue of a message whose id (the same
// scope, key and event) is already in the outbox, waiting to be
// published: the row already there stays as it is. The caller's
// transaction is still usable.
var ErrDuplicateMessage = errors.New("sqlstore: outbox message already enqueued")

// Message is an event to publish after the transaction that enqueues it
// commits. Its id, the broker's deduplication id, is MessageID(Scope,
// Key, Event): the key itself is never stored.
type Message struct {
	// Scope and Key identify the operation that emits the event: the
	// idempotency key with the scope it is claimed in (such as the user
	// id given to idemkit.WithScope), or an operation id of the
	// application's own with an empty Scope. Key must not be empty. Two
	// operations that share a scope and key share message ids, and a
	// broker drops the later one's events as duplicates.
	Scope, Key string
	// Event names the event, such as "order.placed": one operation may
	// emit several events, one message each. At most MaxEventLen bytes.
	Event string
	// Subject is the NATS subject, or the AMQP routing key, to publish
	// on. At most MaxSubjectLen bytes.
	Subject string
	// Headers are published with the message (NATS headers, AMQP
	// headers table). Names are printable ASCII without spaces or ':';
	// values are UTF-8 text without line breaks.
	Headers map[string]string
	// Payload is the message body, at most MaxPayloadLen bytes.
	Payload []byte
}

// MessageID returns the id of the message that the operation (scope, key)
// emits for event: the hex SHA-256 of the three, each prefixed by its
// length, so that no two triples share an id. It holds no byte of the key
// in the clear; a key an attacker could guess from a short list is still
// guessable from its digest, so scope secret keys before they get here.
func MessageID(scope, key, event string) string {
	h := sha256.New()
	h.Write([]byte("idemkit-outbox-v1"))
	var n [8]byte
	for _, s := range []string{scope, key, event} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkMessage returns an error wrapping store.ErrInvalid naming what is
// wrong with m, and the encoded headers.
func checkMessage(m Message) (string, error) {
	var errs []error
	if m.Key == "" {
		errs = append(errs, errors.New("empty key: give the idempotency key or an operation id"))
	}
	switch {
	case m.Event == "":
		errs = append(errs, errors.New("empty event name"))
	case len(m.Event) > MaxEventLen:
		errs = append(errs, fmt.Errorf("event name of %d bytes is over %d", len(m.Event), MaxEventLen))
	}
	switch {
	case m.Subject == "":
		errs = append(errs, errors.New("empty subject"))
	case len(m.Subject) > MaxSubjectLen:
		errs = append(errs, fmt.Errorf("subject of %d bytes is over %d", len(m.Subject), MaxSubjectLen))
	}
	if len(m.Payload) > MaxPayloadLen {
		errs = append(errs, fmt.Errorf("payload of %d bytes is over %d", len(m.Payload), MaxPayloadLen))
	}
	for name, value := range m.Headers {
		if err := checkHeader(name, value); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("%w: outbox message: %w", store.ErrInvalid, err)
	}
	h := m.Headers
	if h == nil {
		h = map[string]string{}
	}
	b, err := json.Marshal(h)
	if err != nil { // a map of strings always encodes
		return "", fmt.Errorf("%w: outbox message headers: %w", store.ErrInvalid, err)
	}
	return string(b), nil
}

// checkHeader refuses a header that a broker could not carry as it is: a
// name that is empty or not printable ASCII without ':' (NATS writes
// headers as text lines), a value that is not UTF-8 or holds a line
// break.
func checkHeader(name, value string) error {
	if name == "" {
		return errors.New("a header with an empty name")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return fmt.Errorf("header name %q: want printable ASCII without spaces or ':'", name)
		}
	}
	if !utf8.ValidString(value) || strings.ContainsAny(value, "\r\n") {
		return fmt.Errorf("header %s: the value is not UTF-8 text on one line", name)
	}
	return nil
}

// Enqueue adds m to the Store's outbox table (WithOutboxTable) through the
// View's connection, and returns its id. Through a View on the caller's
// transaction (Store.Tx, Store.On, pgxstore.View) the row commits or rolls
// back with the caller's other statements: a rolled-back transaction
// leaves no message, a committed one leaves it for the relay to publish.
// Enqueue through the same View that completes a claim (Claim.CompleteIn)
// to commit the business write, the record and the event together.
//
// It returns an error wrapping store.ErrInvalid for a message that breaks
// a limit, and ErrDuplicateMessage when a message with the same id waits
// in the outbox; the transaction stays usable after either. A message
// whose earlier copy was already published and removed is enqueued again,
// with the same id: the broker drops the copy within its deduplication
// window (see the relay, package queue/idemrelay).
func (v *View) Enqueue(ctx context.Context, m Message) (string, error) {
	headers, err := checkMessage(m)
	if err != nil {
		return "", err
	}
	if err := v.check("enqueue", ""); err != nil {
		return "", err
	}
	id := MessageID(m.Scope, m.Key, m.Event)
	n, err := v.c.Exec(ctx, v.s.ob.enqueue, id, m.Event, m.Subject, headers, nonNil(m.Payload))
	if v.s.q.base == &mysql && err != nil {
		if code, ok := mysqlNumber(err); ok && code == 1062 { // duplicate key: only the statement is rolled back
			n, err = 0, nil
		}
	}
	switch {
	case err != nil:
		if noTable(err) {
			return "", fmt.Errorf("sqlstore: enqueue: %w: outbox table %s does not exist; create it with Store.CreateOutbox or the statements of sqlstore.OutboxSchema (%w)", store.ErrUnavailable, v.s.cfg.outboxTable, err)
		}
		return "", v.wrap(ctx, "enqueue", "", err)
	case n == 0:
		return id, fmt.Errorf("%w: id %s", ErrDuplicateMessage, id)
	}
	return id, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// OutboxTable returns the Store's outbox table name, as given to
// WithOutboxTable.
func (s *Store) OutboxTable() string { return s.cfg.outboxTable }

// CreateOutbox creates the Store's outbox table if it does not exist: the
// statements of OutboxSchema, run in order.
func (s *Store) CreateOutbox(ctx context.Context) error {
	stmts, err := OutboxSchema(s.Dialect(), s.cfg.outboxTable)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if _, err := s.db.ExecContext(ctx, st); err != nil {
			return wrap(ctx, "create outbox", "", err)
		}
	}
	return nil
}

// OutboxSchema returns the statements that create the outbox table for
// d, for migration tools. They are idempotent (IF NOT EXISTS). The table
// holds one row per message waiting to be published:
//
//	seq           bigint, ascending: the publishing order (primary key)
//	msg_id        the message id (MessageID), unique
//	event         the event name
//	subject       the NATS subject or AMQP routing key
//	headers       the headers, a JSON object of strings
//	payload       the body
//	created_at    when the row was written (the database's clock, UTC)
//	attempts      failed publishing attempts so far
//	available_at  when a relay may try it next
//
// It returns an error wrapping store.ErrInvalid for an invalid dialect or
// table name.
func OutboxSchema(d Dialect, table string) ([]string, error) {
	if d.d == nil {
		return nil, fmt.Errorf("%w: invalid dialect", store.ErrInvalid)
	}
	if err := checkTable(table); err != nil {
		return nil, err
	}
	t := quoteTable(d.d, table)
	base := table[strings.LastIndex(table, ".")+1:]
	uniq := d.d.quote(shorten(base, "_msg_id"))
	if d.d == &postgres {
		return []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	msg_id       VARCHAR(64) NOT NULL,
	event        TEXT        NOT NULL,
	subject      TEXT        NOT NULL,
	headers      TEXT        NOT NULL,
	payload      BYTEA       NOT NULL,
	created_at   TIMESTAMPTZ NOT NULL,
	attempts     INTEGER     NOT NULL DEFAULT 0,
	available_at TIMESTAMPTZ NOT NULL,
	CONSTRAINT ` + uniq + ` UNIQUE (msg_id)
)`}, nil
	}
	return []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	seq          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	msg_id       VARCHAR(64)  CHARACTER SET ascii NOT NULL,
	event        VARCHAR(255) NOT NULL,
	subject      VARCHAR(255) NOT NULL,
	headers      MEDIUMTEXT   NOT NULL,
	payload      LONGBLOB     NOT NULL,
	created_at   DATETIME(6)  NOT NULL,
	attempts     INT          NOT NULL DEFAULT 0,
	available_at DATETIME(6)  NOT NULL,
	UNIQUE KEY ` + uniq + ` (msg_id)
) ENGINE=InnoDB`}, nil
}

// shorten appends suffix to name, cutting name to fit 63 bytes.
func shorten(name, suffix string) string {
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// outboxQueries are the outbox's statements for one table.
type outboxQueries struct {
	postgres bool
	enqueue  string
	claim    string // with SKIP LOCKED
	claimOld string // MySQL without SKIP LOCKED: plain FOR UPDATE
	del      string // PostgreSQL: a prefix, ... IN (
	delOne   string // MySQL: one row
	retry    string
	lag      string
}

func newOutboxQueries(d *dialect, table string) *outboxQueries {
	t := quoteTable(d, table)
	const cols = `seq, msg_id, event, subject, headers, payload, `
	if d == &postgres {
		return &outboxQueries{
			postgres: true,
			enqueue: `INSERT INTO ` + t + ` (msg_id, event, subject, headers, payload, created_at, available_at)
VALUES ($1, $2, $3, $4, $5, statement_timestamp(), statement_timestamp()) ON CONFLICT (msg_id) DO NOTHING`,
			claim: `SELECT ` + cols + `(extract(epoch FROM statement_timestamp() - created_at) * 1000000)::bigint, attempts FROM ` + t + `
WHERE available_at <= statement_timestamp() ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
			del:   `DELETE FROM ` + t + ` WHERE seq IN (`,
			retry: `UPDATE ` + t + ` SET attempts = attempts + 1, available_at = statement_timestamp() + $1::bigint * interval '1 microsecond' WHERE seq = $2`,
			lag: `SELECT (SELECT count(*) FROM ` + t + `),
	coalesce((SELECT (extract(epoch FROM statement_timestamp() - created_at) * 1000000)::bigint FROM ` + t + ` ORDER BY seq LIMIT 1), 0)`,
		}
	}
	claim := `SELECT ` + cols + `TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)), attempts FROM ` + t + `
WHERE available_at <= UTC_TIMESTAMP(6) ORDER BY seq LIMIT ? FOR UPDATE`
	return &outboxQueries{
		enqueue: `INSERT INTO ` + t + ` (msg_id, event, subject, headers, payload, created_at, available_at)
VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
		claim:    claim + " SKIP LOCKED",
		claimOld: claim,
		delOne:   `DELETE FROM ` + t + ` WHERE seq = ?`,
		retry:    `UPDATE ` + t + ` SET attempts = attempts + 1, available_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE seq = ?`,
		lag: `SELECT (SELECT COUNT(*) FROM ` + t + `),
	COALESCE((SELECT TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)) FROM ` + t + ` ORDER BY seq LIMIT 1), 0)`,
	}
}

// placeholders returns n placeholders from the first, joined by commas.
func (q *outboxQueries) placeholders(first, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		if q.postgres {
			b.WriteString("$" + strconv.Itoa(first+i))
		} else {
			b.WriteString("?")
		}
	}
	return b.String()
}

// OutboxMessage is a message a relay claimed from the outbox.
type OutboxMessage struct {
	// Seq is the row's sequence number: its place in the outbox's order.
	Seq int64
	// ID is the message id (MessageID), the broker's deduplication id.
	ID      string
	Event   string
	Subject string
	Headers map[string]string
	Payload []byte
	// Age is how long ago the row was written, by the database's clock.
	Age time.Duration
	// Attempts counts the failed publishing attempts before this one.
	Attempts int
}

// MaxOutboxBatch is the most messages one ClaimOutbox takes.
const MaxOutboxBatch = 10_000

// OutboxBatch is a batch of outbox rows that one relay holds: they stay
// locked, in a transaction of the Store's pool, until Finish or Release,
// and other relays skip them meanwhile. A relay that dies holding a
// batch loses its connection; the server rolls the transaction back and
// the rows are there for the next relay, unchanged.
type OutboxBatch struct {
	s    *Store
	tx   *sql.Tx
	msgs []OutboxMessage
}

// ClaimOutbox begins a transaction on the Store's pool and locks at most
// n (1 to MaxOutboxBatch) of the oldest outbox rows that are due and that
// no other transaction holds (FOR UPDATE SKIP LOCKED; on MySQL before
// 8.0.1 and MariaDB before 10.6, FOR UPDATE, so that relays take turns).
// The batch holds a connection until Finish or Release, whatever becomes
// of ctx (which bounds the claim's statement): always call one of them.
// It may be empty.
// Errors wrap store.ErrInvalid (n out of range) or the database's error
// (store.ErrUnavailable when it did not answer).
func (s *Store) ClaimOutbox(ctx context.Context, n int) (*OutboxBatch, error) {
	if n < 1 || n > MaxOutboxBatch {
		return nil, fmt.Errorf("%w: sqlstore: claim outbox: batch of %d is outside [1, %d]", store.ErrInvalid, n, MaxOutboxBatch)
	}
	if s.closed() {
		return nil, fmt.Errorf("sqlstore: claim outbox: %w", ErrClosed)
	}
	query := s.ob.claim
	var opts *sql.TxOptions
	if !s.ob.postgres {
		skip, err := s.mysqlSkipLocked(ctx)
		if err != nil {
			return nil, wrap(ctx, "claim outbox", "", err)
		}
		if !skip {
			query = s.ob.claimOld
		}
		// No gap locks: a relay's locking read must not block enqueues.
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	// The transaction outlives ctx (database/sql would roll it back when
	// ctx ends): a relay shutting down must still be able to remove what
	// the broker confirmed. Finish or Release ends it.
	tx, err := s.db.BeginTx(context.WithoutCancel(ctx), opts)
	if err != nil {
		return nil, wrap(ctx, "claim outbox", "", err)
	}
	msgs, err := claimRows(ctx, tx, query, n)
	if err != nil {
		tx.Rollback()
		if noTable(err) {
			return nil, fmt.Errorf("sqlstore: claim outbox: %w: outbox table %s does not exist; create it with Store.CreateOutbox or the statements of sqlstore.OutboxSchema", store.ErrUnavailable, s.cfg.outboxTable)
		}
		if isScan(err) {
			return nil, corrupt("claim outbox", "", err)
		}
		return nil, wrap(ctx, "claim outbox", "", err)
	}
	return &OutboxBatch{s: s, tx: tx, msgs: msgs}, nil
}

func claimRows(ctx context.Context, tx *sql.Tx, query string, n int) ([]OutboxMessage, error) {
	rows, err := tx.QueryContext(ctx, query, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []OutboxMessage
	for rows.Next() {
		var m OutboxMessage
		var headers string
		var ageMicros int64
		if err := rows.Scan(&m.Seq, &m.ID, &m.Event, &m.Subject, &headers, &m.Payload, &ageMicros, &m.Attempts); err != nil {
			return nil, scanError{err}
		}
		if err := json.Unmarshal([]byte(headers), &m.Headers); err != nil {
			return nil, scanError{fmt.Errorf("headers of row %d: %w", m.Seq, err)}
		}
		m.Age = time.Duration(ageMicros) * time.Microsecond
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return msgs, rows.Close()
}

// Messages returns the batch's messages, oldest first. The slice is the
// batch's own: do not change it.
func (b *OutboxBatch) Messages() []OutboxMessage { return b.msgs }

// Retry is a claimed message whose publishing failed: Finish leaves its
// row, counts the attempt and makes it due again After from now.
type Retry struct {
	Seq   int64
	After time.Duration
}

// Finish removes the rows of published (sequence numbers of the batch's
// messages the broker confirmed), defers the rows of retry, and commits;
// the rows it names neither way stay as they were. Only a nil error means
// the removal committed: otherwise the rows stay, and a relay publishes
// them again (the broker's deduplication drops the copies).
func (b *OutboxBatch) Finish(ctx context.Context, published []int64, retry []Retry) error {
	if b.tx == nil {
		return fmt.Errorf("%w: sqlstore: outbox batch already finished or released", store.ErrInvalid)
	}
	tx := b.tx
	b.tx = nil
	defer tx.Rollback()
	if b.s.ob.postgres {
		for len(published) > 0 {
			chunk := published[:min(len(published), 1000)]
			published = published[len(chunk):]
			args := make([]any, len(chunk))
			for i, seq := range chunk {
				args[i] = seq
			}
			if _, err := tx.ExecContext(ctx, b.s.ob.del+b.s.ob.placeholders(1, len(chunk))+")", args...); err != nil {
				return wrap(ctx, "finish outbox batch", "", err)
			}
		}
	} else {
		// On MySQL one row at a time, by primary key: a DELETE of an IN
		// list may be planned as a scan, which waits on rows other relays
		// hold (and deadlocked with them in tests). Prepared once a batch,
		// each is one round trip.
		if len(published) > 0 {
			st, err := tx.PrepareContext(ctx, b.s.ob.delOne)
			if err != nil {
				return wrap(ctx, "finish outbox batch", "", err)
			}
			defer st.Close()
			for _, seq := range published {
				if _, err := st.ExecContext(ctx, seq); err != nil {
					return wrap(ctx, "finish outbox batch", "", err)
				}
			}
		}
	}
	for _, r := range retry {
		if r.After < 0 {
			return fmt.Errorf("%w: sqlstore: outbox retry of row %d after %v: negative delay", store.ErrInvalid, r.Seq, r.After)
		}
		if _, err := tx.ExecContext(ctx, b.s.ob.retry, r.After.Microseconds(), r.Seq); err != nil {
			return wrap(ctx, "finish outbox batch", "", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return wrap(ctx, "finish outbox batch", "", err)
	}
	return nil
}

// Release ends the batch without changing its rows, which other relays
// may then claim. It is a no-op after Finish.
func (b *OutboxBatch) Release() error {
	if b.tx == nil {
		return nil
	}
	tx := b.tx
	b.tx = nil
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("sqlstore: release outbox batch: %w", err)
	}
	return nil
}

// OutboxState is what waits in the outbox.
type OutboxState struct {
	// Pending counts the rows not yet published.
	Pending int64
	// Lag is the age of the oldest of them (by the database's clock), 0
	// when there is none.
	Lag time.Duration
}

// OutboxState counts the rows waiting in the outbox and the age of the
// oldest, by the database's clock. It counts every row (a scan of the
// table): call it from a metrics loop, not per request.
func (s *Store) OutboxState(ctx context.Context) (OutboxState, error) {
	var st OutboxState
	var micros int64
	if err := s.db.QueryRowContext(ctx, s.ob.lag).Scan(&st.Pending, &micros); err != nil {
		if noTable(err) {
			return st, fmt.Errorf("sqlstore: outbox state: %w: outbox table %s does not exist", store.ErrUnavailable, s.cfg.outboxTable)
		}
		return st, wrap(ctx, "outbox state", "", err)
	}
	st.Lag = time.Duration(max(micros, 0)) * time.Microsecond
	return st, nil
}
