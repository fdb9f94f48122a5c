package idemkit

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Errors returned by the engine. Test for them with errors.Is; the errors
// returned wrap them with detail.
var (
	// ErrDuplicate reports a repeat inside a Guard window. The error is a
	// *ConflictError whose RetryAfter says when the window ends.
	ErrDuplicate = errors.New("idemkit: duplicate request")
	// ErrInProgress reports that the first execution for a key is still
	// running. The error is a *ConflictError with a retry hint.
	ErrInProgress = errors.New("idemkit: request in progress")
	// ErrMismatch reports a key reused with a different payload fingerprint.
	ErrMismatch = errors.New("idemkit: key reused with a different payload")
	// ErrLeaseLost reports that fn ran but its lease had expired and
	// another caller claimed the key, or could have (the heartbeat could
	// not confirm the lease before it ended), so the outcome was not
	// recorded. It is also the cause (context.Cause) of fn's context when
	// that context is cancelled for a lost lease.
	ErrLeaseLost = errors.New("idemkit: lease lost; outcome not recorded")
	// ErrTokenInvalid reports a token that is unknown, expired, forged,
	// issued to another principal, or already used without a recorded
	// result.
	ErrTokenInvalid = errors.New("idemkit: invalid or used token")
	// ErrResultTooLarge reports a result over the configured size cap
	// (WithMaxResultSize). The result is refused, never truncated. By
	// default the key keeps a terminal record, and every repeat gets an
	// error wrapping ErrResultTooLarge without running the work; with
	// WithOversized(ReleaseKey) the key is released instead.
	ErrResultTooLarge = errors.New("idemkit: result exceeds the size cap")
	// ErrUnavailable reports that the store could not be reached or did not
	// answer in time, under the fail-closed policy. It is the same value as
	// store.ErrUnavailable.
	ErrUnavailable = store.ErrUnavailable
	// ErrInvalid reports an argument the engine rejects (an empty key, a
	// bad option). It is the same value as store.ErrInvalid.
	ErrInvalid = store.ErrInvalid
)

// ConflictError is returned for a repeat that must wait: ErrDuplicate in a
// Guard window, ErrInProgress while the first execution runs.
type ConflictError struct {
	// Err is ErrDuplicate or ErrInProgress.
	Err error
	// RetryAfter is how long to wait before a retry can succeed or find
	// the stored result. It is at least one millisecond.
	RetryAfter time.Duration
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.Err, e.RetryAfter)
}

// Unwrap returns e.Err, so errors.Is(err, ErrDuplicate) works.
func (e *ConflictError) Unwrap() error { return e.Err }

// RetryAfter returns the retry hint carried by err, if it wraps a
// *ConflictError.
func RetryAfter(err error) (time.Duration, bool) {
	var c *ConflictError
	if errors.As(err, &c) {
		return c.RetryAfter, true
	}
	return 0, false
}

// unavailable wraps a store failure for the fail-closed policy.
func unavailable(op string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("idemkit: %s: %w", op, err)
	}
	return fmt.Errorf("idemkit: %s: %w: %w", op, ErrUnavailable, err)
}
