package httpcore

import (
	"encoding/binary"
	"errors"
)

// A stored response, version 1:
//
//	[0]    version (1)
//	[1:3]  status, big-endian
//	uvarint header count, then per header:
//	       uvarint name length, name, uvarint value count,
//	       per value: uvarint length, value
//	rest   body
//
// Only the headers on an adapter's replay allow-list are stored.
//
// A terminal record stands for a response that was not stored:
// [0] terminalVersion (2), [1] the reason.
const (
	responseVersion = 1
	terminalVersion = 2
)

// ErrCorrupt is returned by Decode for a stored value that is not a
// well-formed stored response.
var ErrCorrupt = errors.New("corrupt stored response")

// Reason says why a response was not stored, in a terminal record.
type Reason byte

// Reasons a response was not stored.
const (
	ReasonTooLarge       Reason = 1 + iota // over the stored-size cap
	ReasonStreamed                         // flushed or hijacked
	ReasonOutcomeUnknown                   // the handler could not learn its outcome
)

// TerminalRecord returns the stored value that stands for a response not
// kept for reason r.
func TerminalRecord(r Reason) []byte { return []byte{terminalVersion, byte(r)} }

// Terminal reports whether b is a terminal record and, if so, the problem
// a retry gets: its kind and a detail that says why the response was not
// stored.
func Terminal(b []byte) (Kind, string, bool) {
	if len(b) != 2 || b[0] != terminalVersion {
		return 0, "", false
	}
	switch Reason(b[1]) {
	case ReasonTooLarge:
		return KindResponseNotStored, DetailTooLarge, true
	case ReasonStreamed:
		return KindResponseNotStored, "the first request with this key was processed, but its response was streamed and could not be kept; it is not processed again", true
	case ReasonOutcomeUnknown:
		return KindOutcomeUnknown, "the first request with this key may have been processed, but its outcome could not be learned; it is not processed again", true
	}
	return 0, "", false
}

// DetailTooLarge is the detail of a replayed response-not-stored problem
// whose response was over a size cap.
const DetailTooLarge = "the first request with this key was processed, but its response was too large to keep; it is not processed again"

// Encoding a stored response takes three steps: StartResponse, then
// AppendHeader for each header kept, then FinishResponse with their
// number and the body. MaxHeaderLen and MaxResponseLen size the buffer.

// StartResponse appends to b the head of a stored response with status,
// and one byte for the header count that FinishResponse sets.
func StartResponse(b []byte, status int) []byte {
	return append(b, responseVersion, byte(status>>8), byte(status), 0)
}

// AppendHeader appends a header, name and values, to a stored response
// begun by StartResponse.
func AppendHeader[V string | []byte](b []byte, name string, values []V) []byte {
	b = appendField(b, name)
	b = binary.AppendUvarint(b, uint64(len(values)))
	for _, v := range values {
		b = appendField(b, v)
	}
	return b
}

func appendField[V string | []byte](b []byte, s V) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// FinishResponse sets the header count of the stored response b, whose
// head StartResponse appended at start, to headers, and appends body.
func FinishResponse(b []byte, start, headers int, body []byte) []byte {
	if headers < 0x80 {
		b[start+3] = byte(headers)
		return append(b, body...)
	}
	// A count of 128 or more takes more than the byte kept for it: the
	// headers move up.
	var n [binary.MaxVarintLen64]byte
	count := binary.PutUvarint(n[:], uint64(headers))
	at := start + 3
	b = append(b, n[:count-1]...)
	copy(b[at+count:], b[at+1:len(b)-count+1])
	copy(b[at:], n[:count])
	return append(b, body...)
}

// MaxHeaderLen is the most AppendHeader appends for name and values.
func MaxHeaderLen[V string | []byte](name string, values []V) int {
	n := 2*binary.MaxVarintLen64 + len(name)
	for _, v := range values {
		n += binary.MaxVarintLen64 + len(v)
	}
	return n
}

// MaxResponseLen is the most a stored response appends besides its
// headers (MaxHeaderLen): its head, header count and body.
func MaxResponseLen(body int) int { return 3 + binary.MaxVarintLen64 + body }

// Response is a stored response that Decode checked whole: reading its
// headers (Field, Count) needs no more checks.
type Response struct {
	// Status is the response status, from 100 to 999.
	Status int
	// Headers is the number of header names stored, Values the number of
	// their values, over all names.
	Headers, Values int
	// Body is the response body, a part of the decoded value.
	Body []byte

	b   []byte // the stored value up to the body
	off int    // where the next header or value starts in b
}

// Decode checks that b is a well-formed stored response and returns it.
// It returns ErrCorrupt when it is not: a wrong version, a status outside
// 100 to 999, or a count or length that is malformed, written in more
// bytes than it needs, or runs past b. Every response has one encoding:
// what Decode accepts is exactly what the encoder writes for the response
// it returns.
// What it returns aliases b.
func Decode(b []byte) (Response, error) {
	if len(b) < 4 || b[0] != responseVersion {
		return Response{}, ErrCorrupt
	}
	status := int(binary.BigEndian.Uint16(b[1:3]))
	if status < 100 || status > 999 {
		return Response{}, ErrCorrupt
	}
	// Each count and length is read inline when it is one byte (small),
	// by readCount otherwise. A malformed one reads as 0 and moves off
	// past len(b), where every later read stays: the loops end and the
	// check below fails.
	off, names := 3, 0
	if names = small(b, off); names >= 0 {
		off++
	} else {
		names, off = readCount(b, off)
	}
	start, values := off, 0
	for range names {
		n, k := 0, 0
		if n = small(b, off); n >= 0 { // the name's length
			off++
		} else {
			n, off = readCount(b, off)
		}
		off += n
		if k = small(b, off); k >= 0 {
			off++
		} else {
			k, off = readCount(b, off)
		}
		values += k
		for range k {
			if n = small(b, off); n >= 0 {
				off++
			} else {
				n, off = readCount(b, off)
			}
			off += n
		}
	}
	if off > len(b) {
		return Response{}, ErrCorrupt
	}
	return Response{Status: status, Headers: names, Values: values, Body: b[off:], b: b[:off], off: start}, nil
}

// A checked response's headers are read in order: for each of Headers,
// Field returns the name, Count its number of values, and Field each
// value in turn.

// Field returns the next header name or value.
func (r *Response) Field() []byte {
	n := r.uvarint()
	r.off += n
	return r.b[r.off-n : r.off]
}

// Count returns the number of values of the header whose name Field just
// returned.
func (r *Response) Count() int { return r.uvarint() }

// uvarint reads a count or length of a checked encoding. It is inlined,
// into Field and Count too: most are one byte, and a loop costs less to
// inline than a call to binary.Uvarint.
func (r *Response) uvarint() int {
	off := r.off
	c := r.b[off]
	u := int(c & 0x7f)
	for s := uint(7); c >= 0x80; s += 7 {
		off++
		c = r.b[off]
		u |= int(c&0x7f) << s
	}
	r.off = off + 1
	return u
}

// small returns the one-byte uvarint at b[off] when it is one and does
// not exceed the bytes left after it, -1 otherwise. It is inlined: most
// counts and lengths are under 128.
func small(b []byte, off int) int {
	if off < len(b) {
		if c := int(b[off]); c < min(0x80, len(b)-off) {
			return c
		}
	}
	return -1
}

// count reads the uvarint at b[off:], a count or a field length, which
// cannot exceed the bytes after it, and returns it and the offset after
// it. A malformed or too large value gives 0 and len(b)+1.
func count(b []byte, off int) (v, next int) {
	if c := small(b, off); c >= 0 {
		return c, off + 1
	}
	return readCount(b, off)
}

// readCount is count for a uvarint of any length, too large to be inlined
// itself with the call to binary.Uvarint. A malformed, long-form or too
// large value, or off past len(b), gives 0 and len(b)+1.
func readCount(b []byte, off int) (v, next int) {
	if off >= len(b) {
		return 0, len(b) + 1
	}
	u, n := binary.Uvarint(b[off:])
	// A last byte of 0 after the first makes a longer form of a smaller
	// number (0x80 0x00 is 0), which binary.Uvarint takes: it is refused,
	// so that every response has one encoding.
	if n <= 0 || u > uint64(len(b)-off-n) || b[off+n-1] == 0 {
		return 0, len(b) + 1
	}
	return int(u), off + n
}
