package idemhttp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
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
)

// terminalRecord returns the stored value that stands for a response not
// kept for the given reason.
func terminalRecord(reason byte) []byte { return []byte{terminalVersion, reason} }

// terminalReason reports whether b is a terminal record and, if so, says
// why the response was not stored.
func terminalReason(b []byte) (string, bool) {
	if len(b) != 2 || b[0] != terminalVersion {
		return "", false
	}
	switch b[1] {
	case reasonTooLarge:
		return "the first request with this key was processed, but its response was too large to keep; it is not processed again", true
	case reasonStreamed:
		return "the first request with this key was processed, but its response was streamed and could not be kept; it is not processed again", true
	}
	return "", false
}

var errCorruptResponse = errors.New("idemhttp: corrupt stored response")

func encodeResponse(status int, h http.Header, allow []string, body []byte) []byte {
	n, size := 0, 3+binary.MaxVarintLen64+len(body)
	for _, name := range allow {
		if vs, ok := h[name]; ok {
			n++
			size += 2*binary.MaxVarintLen64 + len(name)
			for _, v := range vs {
				size += binary.MaxVarintLen64 + len(v)
			}
		}
	}
	b := make([]byte, 3, size)
	b[0] = responseVersion
	binary.BigEndian.PutUint16(b[1:3], uint16(status))
	b = binary.AppendUvarint(b, uint64(n))
	for _, name := range allow {
		vs, ok := h[name]
		if !ok {
			continue
		}
		b = appendString(b, name)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	return append(b, body...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// storedResponse is a validated stored response. Its headers stay encoded
// until send decodes them straight into the writer's header map; body
// aliases the encoded bytes.
type storedResponse struct {
	status  int
	n       int    // header count
	values  int    // value count, all headers together
	headers []byte // the encoded headers, after their count
	body    []byte
}

// decodeResponse checks that b is a well-formed stored response and
// returns it, without allocating.
func decodeResponse(b []byte) (storedResponse, error) {
	var sr storedResponse
	if len(b) < 4 || b[0] != responseVersion {
		return sr, errCorruptResponse
	}
	sr.status = int(binary.BigEndian.Uint16(b[1:3]))
	if sr.status < 100 || sr.status > 999 {
		return sr, errCorruptResponse
	}
	d := decoder{b: b, off: 3}
	sr.n = d.count()
	start := d.off
	for i := 0; i < sr.n && d.err == nil; i++ {
		d.skip()
		k := d.count()
		sr.values += k
		for j := 0; j < k && d.err == nil; j++ {
			d.skip()
		}
	}
	if d.err != nil {
		return storedResponse{}, d.err
	}
	sr.headers, sr.body = b[start:d.off], b[d.off:]
	return sr, nil
}

// send writes sr to w: its headers, which replace any of the same name in
// w's header map, the replay header ("true") when replayed is set (it is
// removed otherwise), Content-Length, the status and the body. allow
// supplies canonical header names to reuse. All header values share one
// string and one slice: two allocations, whatever the headers.
func (sr *storedResponse) send(w http.ResponseWriter, allow []string, replayHeader string, replayed bool) {
	var digits [20]byte
	length := strconv.AppendInt(digits[:0], int64(len(sr.body)), 10)
	var sb strings.Builder
	sb.Grow(len(sr.headers) + len(length))
	sb.Write(sr.headers)
	sb.Write(length)
	text := sb.String()
	// Two more slots hold the replay header's and Content-Length's
	// values.
	vals := make([]string, sr.values+2)
	h := w.Header()
	d := decoder{b: sr.headers}
	for range sr.n {
		name := canonicalName(d.text(text), allow)
		k := d.count()
		for j := range k {
			vals[j] = d.text(text)
		}
		h[name], vals = vals[:k:k], vals[k:]
	}
	if replayed {
		vals[0] = "true"
		h[replayHeader] = vals[0:1:1]
	} else {
		delete(h, replayHeader)
	}
	if bodyAllowed(sr.status) {
		vals[1] = text[len(sr.headers):]
		h["Content-Length"] = vals[1:2:2]
	}
	w.WriteHeader(sr.status)
	if len(sr.body) > 0 {
		_, _ = w.Write(sr.body)
	}
}

func canonicalName(name string, allow []string) string {
	if i := slices.Index(allow, name); i >= 0 {
		return allow[i]
	}
	return name
}

// decoder reads uvarint-framed fields; the first error sticks.
type decoder struct {
	b   []byte
	off int
	err error
}

// count reads a uvarint count that cannot exceed the bytes left.
func (d *decoder) count() int {
	if d.err == nil && d.off < len(d.b) && d.b[d.off] < 0x80 && int(d.b[d.off]) <= len(d.b)-d.off-1 {
		d.off++ // one byte (a value under 128), within bounds: the common case
		return int(d.b[d.off-1])
	}
	return d.slowCount()
}

func (d *decoder) slowCount() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = errCorruptResponse
		return 0
	}
	d.off += n
	if v > uint64(len(d.b)-d.off) {
		d.err = fmt.Errorf("%w: count %d", errCorruptResponse, v)
		return 0
	}
	return int(v)
}

// skip passes over the next length-prefixed field.
func (d *decoder) skip() {
	d.off += d.count()
}

// text returns the next field of an already validated encoding as a
// substring of text, which starts with the same bytes as d.b.
func (d *decoder) text(text string) string {
	n := d.count()
	d.off += n
	return text[d.off-n : d.off]
}
