package idemkit

import (
	"encoding/binary"
	"fmt"

	"github.com/idemkit/idemkit/internal/layout"
	"github.com/idemkit/idemkit/store"
)

// A record is what the engine keeps under an idempotency or token key.
//
// Encoding, version 2 (all integers big-endian):
//
//	[0]      version (2)
//	[1]      state
//	[2:18]   owner nonce (zero for stateReleased; absent for stateIssued)
//	[18:26]  created, unix milliseconds
//	[26:34]  updated, unix milliseconds (a heartbeat makes it grow)
//	[34:42]  fencing token of the claim that wrote it
//	[42:50]  tail, milliseconds: of a claim's TTL, the part after its lease
//	         (see takeable); 0 in other states
//	[50:58]  lineage: the operation's, the same over its takeovers (it
//	         names its steps' records, see step.go)
//	[58:]    uvarint fingerprint length, fingerprint, payload
//
// A token that was issued but not used is the two bytes {2, stateIssued}.
type record struct {
	state       byte
	owner       nonce
	created     int64
	updated     int64
	fence       uint64
	tail        int64
	origin      uint64 // the lineage
	fingerprint string // set when building a record to encode
	fp          []byte // set by decodeRecord; aliases the decoded bytes
	payload     []byte // result (stateDone), encoded error (stateFailed) or uvarint size (stateTooLarge)
}

const recordVersion = layout.RecordVersion

const (
	stateIssued     byte = 1                      // token issued, not used
	stateInProgress byte = layout.StateInProgress // claimed; fn is running
	stateDone       byte = 3                      // fn succeeded; payload is its result
	stateFailed     byte = 4                      // fn failed with a final error; payload encodes it
	stateSpent      byte = 5                      // token whose use failed without a final error
	stateTooLarge   byte = 6                      // fn succeeded, its result was over the cap; payload is uvarint(result size)
	stateReleased   byte = 7                      // a claim released without a result; kept for its fencing token
)

const recordHeaderLen = layout.RecordHeaderLen

// issuedToken is the value stored under a token that has not been used.
var issuedToken = []byte{recordVersion, stateIssued}

// encode returns the binary form of r.
func (r *record) encode() []byte {
	n := recordHeaderLen + binary.MaxVarintLen64 + len(r.fingerprint) + len(r.payload)
	b := make([]byte, recordHeaderLen, n)
	b[0] = recordVersion
	b[1] = r.state
	copy(b[2:18], r.owner[:])
	binary.BigEndian.PutUint64(b[18:26], uint64(r.created))
	binary.BigEndian.PutUint64(b[26:34], uint64(r.updated))
	binary.BigEndian.PutUint64(b[34:42], r.fence)
	binary.BigEndian.PutUint64(b[42:50], uint64(r.tail))
	binary.BigEndian.PutUint64(b[50:58], r.origin)
	b = binary.AppendUvarint(b, uint64(len(r.fingerprint)))
	b = append(b, r.fingerprint...)
	return append(b, r.payload...)
}

// encodedLen returns the length of r's encoding with a payload of n bytes.
func (r *record) encodedLen(n int) int {
	return recordHeaderLen + uvarintLen(uint64(len(r.fingerprint))) + len(r.fingerprint) + n
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// decodeRecord parses b. The fingerprint and payload alias b. Anything but a well-formed
// version 1 record is an error wrapping store.ErrCorrupt.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 2 {
		return r, fmt.Errorf("%w: record of %d bytes", store.ErrCorrupt, len(b))
	}
	if b[0] != recordVersion {
		return r, fmt.Errorf("%w: unknown record version %d", store.ErrCorrupt, b[0])
	}
	r.state = b[1]
	switch r.state {
	case stateIssued:
		if len(b) != 2 {
			return r, fmt.Errorf("%w: issued token record of %d bytes", store.ErrCorrupt, len(b))
		}
		return r, nil
	case stateInProgress, stateDone, stateFailed, stateSpent, stateTooLarge, stateReleased:
	default:
		return r, fmt.Errorf("%w: unknown record state %d", store.ErrCorrupt, r.state)
	}
	if len(b) < recordHeaderLen+1 {
		return r, fmt.Errorf("%w: truncated record of %d bytes", store.ErrCorrupt, len(b))
	}
	copy(r.owner[:], b[2:18])
	r.created = int64(binary.BigEndian.Uint64(b[18:26]))
	r.updated = int64(binary.BigEndian.Uint64(b[26:34]))
	r.fence = binary.BigEndian.Uint64(b[34:42])
	r.tail = int64(binary.BigEndian.Uint64(b[42:50]))
	r.origin = binary.BigEndian.Uint64(b[50:58])
	if r.tail < 0 {
		return r, fmt.Errorf("%w: negative lease tail in record", store.ErrCorrupt)
	}
	fpLen, n := binary.Uvarint(b[recordHeaderLen:])
	rest := b[recordHeaderLen+max(n, 0):]
	if n <= 0 || fpLen > uint64(len(rest)) {
		return r, fmt.Errorf("%w: bad fingerprint length in record", store.ErrCorrupt)
	}
	r.fp = rest[:fpLen]
	r.payload = rest[fpLen:]
	return r, nil
}
