package idemhttp

import (
	"encoding/binary"
	"errors"
	"net/http"
	"unsafe"
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
// Only the headers on the replay allow-list are stored.
//
// A terminal record stands for a response that could not be stored
// (WithUnstored): [0] terminalVersion (2), [1] the reason.
const (
	responseVersion = 1
	terminalVersion = 2
)

// Reasons a response was not stored, kept in a terminal record.
const (
	reasonTooLarge byte = 1 + iota
	reasonStreamed
	reasonOutcomeUnknown // the handler called OutcomeUnknown
)

// terminalRecord returns the stored value that stands for a response not
// kept for the given reason.
func terminalRecord(reason byte) []byte { return []byte{terminalVersion, reason} }

// terminalReason reports whether b is a terminal record and, if so, the
// problem a retry gets: its kind and a detail that says why the response
// was not stored.
func terminalReason(b []byte) (problemKind, string, bool) {
	if len(b) != 2 || b[0] != terminalVersion {
		return 0, "", false
	}
	switch b[1] {
	case reasonTooLarge:
		return kindResponseNotStored, "the first request with this key was processed, but its response was too large to keep; it is not processed again", true
	case reasonStreamed:
		return kindResponseNotStored, "the first request with this key was processed, but its response was streamed and could not be kept; it is not processed again", true
	case reasonOutcomeUnknown:
		return kindOutcomeUnknown, "the first request with this key may have been processed, but its outcome could not be learned; it is not processed again", true
	}
	return 0, "", false
}

var errCorruptResponse = errors.New("idemhttp: corrupt stored response")

// encodeResponse encodes status, the headers of h named in allow, and
// body as a stored response. Each name is looked up in h once: the values
// found are kept, on the stack for an allow-list of up to eight names,
// between sizing the encoding and writing it.
func encodeResponse(status int, h http.Header, allow []string, body []byte) []byte {
	type found struct {
		name string
		vs   []string
	}
	var stack [8]found
	kept := stack[:0]
	size := 3 + binary.MaxVarintLen64 + len(body)
	for _, name := range allow {
		if vs, ok := h[name]; ok {
			kept = append(kept, found{name, vs})
			size += 2*binary.MaxVarintLen64 + len(name)
			for _, v := range vs {
				size += binary.MaxVarintLen64 + len(v)
			}
		}
	}
	b := make([]byte, 3, size)
	b[0] = responseVersion
	binary.BigEndian.PutUint16(b[1:3], uint16(status))
	b = binary.AppendUvarint(b, uint64(len(kept)))
	for _, f := range kept {
		b = appendString(b, f.name)
		b = binary.AppendUvarint(b, uint64(len(f.vs)))
		for _, v := range f.vs {
			b = appendString(b, v)
		}
	}
	return append(b, body...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// sendResponse checks that b is a well-formed stored response and sends
// it to w, in answer to a request of method: its headers, which replace
// any of the same name in w's header map, the replay header ("true") when
// replayed is set (it is removed otherwise), Content-Length where net/http
// does not add it itself (setContentLength), the status and the body. It
// returns errCorruptResponse, having written nothing, when b is not well
// formed: every field is checked before the first is sent.
//
// Header names and values are substrings of b, not copies: b is the
// caller's own (the engine's Result.Value, or what CompleteIn recorded)
// and nothing writes to it once it is stored, so the strings stay as they
// are for as long as the header map holds them. The values are in one
// slice: one allocation, whatever the headers. The stored names are
// already canonical: the route stored only names of its allow-list.
func sendResponse(w http.ResponseWriter, b []byte, method, replayHeader string, replayed bool) error {
	if len(b) < 4 || b[0] != responseVersion {
		return errCorruptResponse
	}
	status := int(binary.BigEndian.Uint16(b[1:3]))
	if status < 100 || status > 999 {
		return errCorruptResponse
	}
	// The first pass checks that every field lies within b, and counts
	// the values.
	n, start, ok := readCount(b, 3)
	off, values := start, 0
	for i := 0; i < n && ok; i++ {
		var k, m int
		if m, off, ok = readCount(b, off); !ok { // the name
			break
		}
		k, off, ok = readCount(b, off+m)
		values += k
		for j := 0; j < k && ok; j++ {
			m, off, ok = readCount(b, off)
			off += m
		}
	}
	if !ok {
		return errCorruptResponse
	}
	body := b[off:]
	// The second pass reads the fields without checks.
	text := unsafe.String(unsafe.SliceData(b), off)
	// One more slot holds the replay header's value.
	vals := make([]string, values+1)
	h := w.Header()
	// A map empty before the headers are set holds only the names set
	// here: whether one is a framing header is then known without looking
	// h up.
	plain := len(h) == 0
	framing := false
	off = start
	for range n {
		var name string
		name, off = validText(text, b, off)
		framing = framing || framingHeader(name)
		var k int
		k, off = validCount(b, off)
		for j := range k {
			vals[j], off = validText(text, b, off)
		}
		h[name], vals = vals[:k:k], vals[k:]
	}
	if replayed {
		vals[0] = "true"
		h[replayHeader] = vals[0:1:1]
	} else {
		delete(h, replayHeader)
	}
	setContentLength(h, method, status, len(body), plain && !framing)
	w.WriteHeader(status)
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
	return nil
}

// readCount reads the uvarint at b[off:], a count or a field length,
// which cannot exceed the bytes after it. It returns the value and the
// offset after it; ok is false when the uvarint is malformed (as
// binary.Uvarint sees it) or too large. A one-byte value, as most are,
// is read without binary.Uvarint.
func readCount(b []byte, off int) (v, next int, ok bool) {
	if off >= len(b) {
		return 0, off, false
	}
	if c := int(b[off]); c < 0x80 {
		return c, off + 1, c <= len(b)-off-1
	}
	u, n := binary.Uvarint(b[off:])
	if n <= 0 || u > uint64(len(b)-off-n) {
		return 0, off, false
	}
	return int(u), off + n, true
}

// validCount reads a uvarint of an encoding sendResponse checked.
func validCount(b []byte, off int) (v, next int) {
	c := b[off]
	u := uint64(c & 0x7f)
	for s := uint(7); c >= 0x80; s += 7 {
		off++
		c = b[off]
		u |= uint64(c&0x7f) << s
	}
	return int(u), off + 1
}

// validText returns the length-prefixed field at b[off:], of an encoding
// sendResponse checked, as a substring of text, which starts with the
// same bytes as b, and the offset after it.
func validText(text string, b []byte, off int) (s string, next int) {
	n, off := validCount(b, off)
	return text[off : off+n], off + n
}
