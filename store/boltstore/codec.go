package boltstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/idemkit/idemkit/store"
)

// formatV1 is the format byte of every value this package writes.
const formatV1 byte = 1

// headerLen is the length of the header before a stored value's bytes:
// the format byte and the expiry in Unix milliseconds.
const headerLen = 1 + 8

// maxLeftMs is the most milliseconds a time.Duration can hold.
const maxLeftMs = math.MaxInt64 / int64(time.Millisecond)

// record is a decoded stored value. value aliases bbolt's memory and is
// valid only inside the transaction that read it.
type record struct {
	expiresMs int64
	value     []byte
}

// encode returns a new stored value holding value, expiring at expiresMs.
func encode(value []byte, expiresMs int64) []byte {
	buf := make([]byte, headerLen+len(value))
	buf[0] = formatV1
	binary.BigEndian.PutUint64(buf[1:headerLen], uint64(expiresMs))
	copy(buf[headerLen:], value)
	return buf
}

// stamp sets the expiry of a stored value made by encode and returns it.
// The value is encoded (copied) before the transaction, so the caller may
// reuse its slice at once; the expiry is known only inside it.
func stamp(stored []byte, expiresMs int64) []byte {
	binary.BigEndian.PutUint64(stored[1:headerLen], uint64(expiresMs))
	return stored
}

// decode parses a stored value read under key.
func decode(key []byte, raw []byte) (record, error) {
	if len(raw) < headerLen {
		return record{}, fmt.Errorf("boltstore: %w: %s: stored value of %d bytes is shorter than the %d-byte header",
			store.ErrCorrupt, keyRef(key), len(raw), headerLen)
	}
	if raw[0] != formatV1 {
		return record{}, fmt.Errorf("boltstore: %w: %s: unknown format byte %d", store.ErrCorrupt, keyRef(key), raw[0])
	}
	return record{
		expiresMs: int64(binary.BigEndian.Uint64(raw[1:headerLen])),
		value:     raw[headerLen:],
	}, nil
}

// expiryMs returns the absolute expiry, in Unix milliseconds, of an entry
// written at now with ttl (already rounded to whole milliseconds). now is
// rounded up, so an entry lives at least its whole TTL.
func expiryMs(now time.Time, ttl time.Duration) int64 {
	ms := int64(time.Millisecond)
	return (now.UnixNano()+ms-1)/ms + ttl.Milliseconds()
}

// left returns the time the record has left at now, in whole milliseconds
// rounded down but at least 1ms while it lives (so a fresh entry never
// reports more than its TTL), or 0 when it has expired.
func (r record) left(now time.Time) time.Duration {
	nowMs, frac := now.UnixMilli(), now.UnixNano()%int64(time.Millisecond)
	if r.expiresMs <= nowMs {
		return 0
	}
	diff := r.expiresMs - nowMs
	if frac > 0 {
		diff-- // part of the millisecond at nowMs has passed
	}
	if diff < 0 || diff > maxLeftMs { // overflow from a far-future expiry
		diff = maxLeftMs
	}
	return max(time.Duration(diff), 1) * time.Millisecond
}

// entry returns the record as a store.Entry owned by the caller.
func (r record) entry(now time.Time) store.Entry {
	return store.Entry{Value: clone(r.value), TTL: r.left(now)}
}

// clone copies b into a new non-nil slice.
func clone(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
