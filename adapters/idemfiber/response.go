package idemfiber

import (
	"encoding/binary"
	"errors"

	"github.com/valyala/fasthttp"
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
// Only headers on the replay allow-list are stored.
const responseVersion = 1

var errCorruptResponse = errors.New("idemfiber: corrupt stored response")

// encodeResponse returns resp's status, allowed headers and body in the
// stored form.
func encodeResponse(resp *fasthttp.Response, allow []string) []byte {
	body := resp.Body()
	b := make([]byte, 3, 3+1+len(body)+64*len(allow))
	b[0] = responseVersion
	binary.BigEndian.PutUint16(b[1:3], uint16(resp.StatusCode()))
	countAt := len(b)
	b = append(b, 0) // header count, fixed below: fewer than 128 names
	n := 0
	for _, name := range allow {
		vs := resp.Header.PeekAll(name)
		if len(vs) == 0 {
			continue
		}
		n++
		b = appendBytes(b, name)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendBytes(b, v)
		}
	}
	b[countAt] = byte(n)
	return append(b, body...)
}

func appendBytes[T string | []byte](b []byte, s T) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// writeStored writes the stored response b into resp, replacing what the
// headers named in b held, and marks it replayed. It checks b whole
// before touching resp.
// replayedName and replayedTrue are the replay header as fasthttp sets it,
// kept so that a replay neither converts nor normalizes them.
var replayedName, replayedTrue = []byte(replayedHeader), []byte("true")

func writeStored(resp *fasthttp.Response, b []byte) error {
	bodyAt, err := checkStored(b)
	if err != nil {
		return err
	}
	resp.SetStatusCode(int(binary.BigEndian.Uint16(b[1:3])))
	// h is checked: every uvarint in it is in bounds, and most are one byte.
	h := b[:bodyAt]
	names, off := int(h[3]), 4
	if names >= 0x80 {
		names, off = uvarintAt(h, 3)
	}
	for range names {
		n, values := 0, 0
		if n = int(h[off]); n < 0x80 {
			off++
		} else {
			n, off = uvarintAt(h, off)
		}
		name := h[off : off+n]
		if off += n; h[off] < 0x80 {
			values = int(h[off])
			off++
		} else {
			values, off = uvarintAt(h, off)
		}
		for i := range values {
			if n = int(h[off]); n < 0x80 {
				off++
			} else {
				n, off = uvarintAt(h, off)
			}
			value := h[off : off+n]
			off += n
			if i == 0 {
				// Stored names are as fasthttp held them when recording:
				// normalizing them again would change nothing.
				resp.Header.SetCanonical(name, value)
			} else {
				resp.Header.AddBytesKV(name, value)
			}
		}
	}
	resp.Header.SetCanonical(replayedName, replayedTrue)
	resp.SetBody(b[bodyAt:])
	return nil
}

// checkStored validates b and returns where its body starts.
func checkStored(b []byte) (int, error) {
	if len(b) < 4 || b[0] != responseVersion {
		return 0, errCorruptResponse
	}
	if s := binary.BigEndian.Uint16(b[1:3]); s < 100 || s > 999 {
		return 0, errCorruptResponse
	}
	// Each uvarint is read inline when it is one byte, by uvarintAt
	// otherwise. A malformed one reads as 0 and moves off past len(b),
	// where every later read stays: the loops end and the check below
	// fails.
	off, names := 3, 0
	if names = small(b, off); names >= 0 {
		off++
	} else {
		names, off = uvarintAt(b, off)
	}
	for range names {
		n, values := 0, 0
		if n = small(b, off); n >= 0 { // the name's length
			off++
		} else {
			n, off = uvarintAt(b, off)
		}
		off += n
		if values = small(b, off); values >= 0 {
			off++
		} else {
			values, off = uvarintAt(b, off)
		}
		for range values {
			if n = small(b, off); n >= 0 {
				off++
			} else {
				n, off = uvarintAt(b, off)
			}
			off += n
		}
	}
	if off > len(b) {
		return 0, errCorruptResponse
	}
	return off, nil
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

// uvarintAt reads the uvarint at b[off:], a count or a length, which
// cannot exceed the bytes left after it, and returns it and the offset
// after it. A malformed or too large value, or off past len(b), gives 0
// and len(b)+1. Its callers read a one-byte value (most are under 128)
// inline first: with the call to binary.Uvarint, uvarintAt is too large to
// be inlined itself.
func uvarintAt(b []byte, off int) (v, next int) {
	if off >= len(b) {
		return 0, len(b) + 1
	}
	u, n := binary.Uvarint(b[off:])
	if n <= 0 || u > uint64(len(b)-off-n) {
		return 0, len(b) + 1
	}
	return int(u), off + n
}
