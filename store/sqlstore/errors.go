package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/idemkit/idemkit/store"
)

// ErrClosed reports an operation on a Store after Close. It wraps
// store.ErrUnavailable. Views keep working: they run on their own
// connection.
var ErrClosed = fmt.Errorf("sqlstore: store closed: %w", store.ErrUnavailable)

// errContended reports an operation that found the key changed under it
// on every attempt; nothing was changed. It wraps store.ErrUnavailable.
var errContended = fmt.Errorf("%w: the key changed under the operation on every attempt", store.ErrUnavailable)

// keyRef names a key in an error text by a short digest, never by its
// bytes: keys may hold secrets.
func keyRef(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key#" + hex.EncodeToString(sum[:4])
}

// wrap turns a driver error of operation op on key into a store error:
// it wraps ctx.Err() when ctx is done, store.ErrUnavailable when the
// database could not be reached or did not answer in time, and always the
// driver's error.
func wrap(ctx context.Context, op, key string, err error) error {
	where := "sqlstore: " + op
	if key != "" {
		where += " " + keyRef(key)
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w: %w (%w)", where, store.ErrUnavailable, cerr, err)
		}
		return fmt.Errorf("%s: %w (%w)", where, cerr, err)
	}
	if unavailable(err) {
		return fmt.Errorf("%s: %w: %w", where, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// corrupt reports a row that could not be scanned.
func corrupt(op, key string, err error) error {
	if key == "" { // a statement over many keys
		return fmt.Errorf("sqlstore: %s: %w: %w", op, store.ErrCorrupt, err)
	}
	return fmt.Errorf("sqlstore: %s %s: %w: %w", op, keyRef(key), store.ErrCorrupt, err)
}

// unavailable reports whether err means the database could not be
// reached, lost the connection, or did not answer in time (timeouts,
// the server's own statement timeouts, lock waits, deadlock victims,
// shutdowns): the statement had no effect that can be relied on, and a
// retry later may succeed.
func unavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	if anyText(err, "invalid connection") {
		// go-sql-driver/mysql's ErrInvalidConn: the connection died under
		// a statement (killed, reset, the server gone). Recognised by its
		// text, since this package imports no driver.
		return true
	}
	if state, ok := sqlState(err); ok {
		switch state[:2] {
		case "08", "53", "57": // connection exception, insufficient resources, operator intervention
			return true
		}
		switch state {
		case "40001", "40P01", "55P03": // serialization failure, deadlock, lock not available
			return true
		}
	}
	if n, ok := mysqlNumber(err); ok {
		switch n {
		case 1205, 1213, 1040, 1053, 2002, 2003, 2006, 2013: // lock wait timeout, deadlock, too many connections, shutdown, connection errors
			return true
		case 1317, 1969, 3024: // interrupted (KILL QUERY), MariaDB's max_statement_time, MySQL's max_execution_time
			return true
		}
	}
	return false
}

// badDSN reports whether err, from a first connection, means the DSN
// itself is wrong: pgx could not parse it (pgx parses the DSN when it
// dials; its *pgconn.ParseConfigError is recognised by type name, since
// this package imports no driver), or the server refused a session
// setting the DSN asked for: an unknown one (PostgreSQL 42704, MySQL 1193)
// or a bad value (PostgreSQL 22023, MySQL 1231 and 1232, and 1064, the
// syntax error of a SET statement go-sql-driver made of a parameter).
func badDSN(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if fmt.Sprintf("%T", e) == "*pgconn.ParseConfigError" {
			return true
		}
	}
	if state, ok := sqlState(err); ok {
		return state == "42704" || state == "22023"
	}
	n, ok := mysqlNumber(err)
	return ok && (n == 1193 || n == 1231 || n == 1232 || n == 1064)
}

// retryable reports whether a statement that failed with err, outside a
// caller's transaction, was rolled back by the server as a deadlock or
// serialization victim and may simply run again.
func retryable(err error) bool {
	if state, ok := sqlState(err); ok {
		return state == "40001" || state == "40P01"
	}
	n, ok := mysqlNumber(err)
	return ok && n == 1213
}

// sqlState returns the SQLSTATE of a driver error that reports one through
// a SQLState() string method (pgx's *pgconn.PgError does).
func sqlState(err error) (string, bool) {
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		if s := se.SQLState(); len(s) == 5 {
			return s, true
		}
	}
	return "", false
}

// mysqlNumber returns the server error number of a go-sql-driver/mysql
// error, read from its text ("Error 1213 (40001): ..."), since this
// package imports no driver.
func mysqlNumber(err error) (int, bool) {
	if err == nil {
		return 0, false
	}
	if rest, ok := strings.CutPrefix(err.Error(), "Error "); ok {
		if end := strings.IndexAny(rest, " :"); end > 0 {
			if n, err := strconv.Atoi(rest[:end]); err == nil {
				return n, true
			}
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return mysqlNumber(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if n, ok := mysqlNumber(e); ok {
				return n, true
			}
		}
	}
	return 0, false
}

// anyText reports whether err or an error it wraps (through Unwrap or
// Unwrap []error) has exactly the text msg.
func anyText(err error, msg string) bool {
	if err == nil {
		return false
	}
	if err.Error() == msg {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return anyText(u.Unwrap(), msg)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyText(e, msg) {
				return true
			}
		}
	}
	return false
}
