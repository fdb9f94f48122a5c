// Package store defines the contract between idemkit's engine and the
// key-value backends that hold its claims, records and tokens.
//
// A Store is a small set of atomic, TTL-bearing operations on single keys.
// The engine never reads and then writes in two steps: every decision it
// makes rests on exactly one of these operations, so each implementation
// MUST perform each operation atomically (one Redis command or Lua script,
// one bbolt read-write transaction, one critical section in memory). A
// GET-then-SET implementation is not a valid Store.
//
// Rules every implementation MUST follow:
//
//   - Keys are non-empty strings of at most MaxKeyLen bytes. Values are
//     non-nil byte slices (an empty, non-nil slice is a valid value) of at
//     most MaxValueLen bytes. TTLs are positive; they are kept by the
//     backend, not by the caller's clock, with millisecond resolution: a TTL
//     that is not a whole number of milliseconds is rounded up. Violations
//     return an error wrapping ErrInvalid and change nothing.
//   - An expired entry is absent for every operation, whether or not the
//     backend has reclaimed its space yet.
//   - Values are copied on the way in and on the way out: a caller that
//     mutates a slice it passed or received changes nothing stored.
//   - A backend that cannot be reached, or does not answer in time, returns
//     an error wrapping ErrUnavailable (keeping the original error in the
//     chain). When ctx is cancelled or its deadline passes before the
//     operation is known to have happened, the error wraps ctx.Err() and,
//     for a deadline, ErrUnavailable too. Policies key off ErrUnavailable.
//   - Data the backend holds that cannot be decoded returns an error
//     wrapping ErrCorrupt that names the key; it never panics.
//   - All methods are safe for concurrent use.
//
// Optional capabilities (Closer, Pinger, SetNXValuer, Batcher, Scanner)
// are separate interfaces, found by type assertion, as database/sql/driver
// does.
//
// The package storetest holds the conformance suite every Store must pass.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits shared by every Store.
const (
	// MaxKeyLen is the longest key, in bytes, that a Store accepts.
	MaxKeyLen = 512
	// MaxValueLen is the largest value, in bytes, that a Store accepts.
	MaxValueLen = 16 << 20
)

// Sentinel errors. Implementations wrap them; callers test with errors.Is.
var (
	// ErrNotFound reports that a key is absent or has expired.
	ErrNotFound = errors.New("store: key not found")
	// ErrInvalid reports an argument the contract rejects: an empty or
	// oversized key, a nil or oversized value, or a TTL <= 0.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrUnavailable reports a backend that cannot be reached or did not
	// answer in time. Nothing can be concluded about the key's state.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrCorrupt reports stored data that cannot be decoded.
	ErrCorrupt = errors.New("store: corrupt entry")
)

// Entry is a value together with its remaining time to live, as read in
// the same atomic step.
type Entry struct {
	// Value is the stored value; the caller owns it.
	Value []byte
	// TTL is the time the entry has left, at millisecond resolution.
	// It is always positive for an entry that was returned.
	TTL time.Duration
}

// Store is the set of atomic single-key operations the engine needs.
// See the package documentation for the rules every implementation follows.
type Store interface {
	// SetNX stores value under key with the given TTL only if key is
	// absent, and reports whether it did. When key is present it returns
	// false together with the existing value and its remaining TTL, read
	// in the same atomic step, so a caller decides with one round trip.
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, existing Entry, err error)

	// Get returns the value under key and its remaining TTL, or an error
	// wrapping ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)

	// CompareAndSwap replaces the value under key with new, and its TTL
	// with ttl, only if the current value equals old byte for byte. It
	// reports whether it did; an absent key reports false and no error.
	// With new equal to old it extends a lease.
	CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error)

	// CompareAndDelete deletes key only if its current value equals old
	// byte for byte, and reports whether it did; an absent key reports
	// false and no error.
	CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error)

	// Consume deletes key and returns the value it held, in one atomic
	// step, or an error wrapping ErrNotFound. Of many concurrent callers
	// at most one receives the value.
	Consume(ctx context.Context, key string) ([]byte, error)
}

// SetNXValuer is implemented by stores that can run SetNX more cheaply
// when the caller does not need the existing entry's remaining TTL: on
// Redis 7.0 and later, one SET key value NX PX ttl GET command instead of
// a transaction that also reads PTTL. The engine uses it, when the store
// offers it, for the claims that only look at the existing record's
// value (Do and Begin); Guard, whose answer is the remaining window,
// keeps SetNX. A store offers it only when it costs no more than SetNX
// (its callers get no TTL); a wrapper, exactly when the store it wraps
// does (a tiered store: when its primary does).
type SetNXValuer interface {
	// SetNXValue is SetNX without the existing entry's TTL. It stores
	// value under key with the given TTL only if key is absent, and
	// reports whether it did. When key is present it returns false
	// together with the existing value (non-nil; the caller owns it),
	// read in the same atomic step as the write that did not happen; when
	// it stored, existing is nil. It is as atomic as SetNX, against SetNX
	// and every other operation on the key, and follows the same rules:
	// arguments are checked as SetNX checks them, the TTL is kept as
	// SetNX keeps it (an entry it stored expires as one SetNX stored), an
	// expired entry is absent, values are copied, and a write reported
	// with an error may have happened just as with SetNX (a store that
	// waits for replicas reports set == true together with its error).
	SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, existing []byte, err error)
}

// Closer is implemented by stores that hold resources (files, goroutines,
// connections they own). After Close returns, every goroutine the store
// started has stopped.
type Closer interface {
	Close() error
}

// Pinger is implemented by stores that can check that their backend
// answers. It returns nil or an error wrapping ErrUnavailable.
type Pinger interface {
	Ping(ctx context.Context) error
}

// CheckKey returns an error wrapping ErrInvalid when key breaks the
// contract's key rules, and nil otherwise.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds the %d-byte limit", ErrInvalid, len(key), MaxKeyLen)
	}
	return nil
}

// CheckValue returns an error wrapping ErrInvalid when value is nil or
// larger than MaxValueLen, and nil otherwise.
func CheckValue(value []byte) error {
	switch {
	case value == nil:
		return fmt.Errorf("%w: nil value", ErrInvalid)
	case len(value) > MaxValueLen:
		return fmt.Errorf("%w: value of %d bytes exceeds the %d-byte limit", ErrInvalid, len(value), MaxValueLen)
	}
	return nil
}

// CheckTTL returns an error wrapping ErrInvalid when ttl is not positive,
// and nil otherwise.
func CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: TTL %v is not positive", ErrInvalid, ttl)
	}
	return nil
}

// CheckSet validates the arguments of SetNX: key, value and ttl.
func CheckSet(key string, value []byte, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := CheckValue(value); err != nil {
		return err
	}
	return CheckTTL(ttl)
}

// CheckSwap validates the arguments of CompareAndSwap.
func CheckSwap(key string, old, new []byte, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("%w: nil old value", ErrInvalid)
	}
	return CheckSet(key, new, ttl)
}

// CheckDelete validates the arguments of CompareAndDelete.
func CheckDelete(key string, old []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("%w: nil old value", ErrInvalid)
	}
	return nil
}

// RoundTTL rounds ttl up to a whole number of milliseconds, the resolution
// every Store keeps. It is meant for valid (positive) TTLs; a TTL within a
// millisecond of the largest Duration is rounded down instead of
// overflowing.
func RoundTTL(ttl time.Duration) time.Duration {
	r := ttl % time.Millisecond
	switch {
	case r == 0:
		return ttl
	case ttl > math.MaxInt64-time.Millisecond:
		return ttl - r
	default:
		return ttl + time.Millisecond - r
	}
}

// Unavailable wraps err so that it matches both ErrUnavailable and err
// under errors.Is, with op naming the failed operation.
func Unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// Scanner is implemented by stores that can list their live keys, for
// operator tools (idemctl scan); the engine never relies on it. Scan calls
// fn with each live key that starts with prefix and its entry, in no
// particular order, until fn returns false or every key was seen. It is not
// a snapshot: keys written or expiring during the scan may or may not be
// seen.
type Scanner interface {
	Scan(ctx context.Context, prefix string, fn func(key string, ent Entry) bool) error
}
