package idemhttp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
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

// storedResponse is a decoded stored response. Header names and values
// share one string; body aliases the encoded bytes.
type storedResponse struct {
	status  int
	headers []storedHeader
	body    []byte
	spare   []string // two free value slots for replay
}

type storedHeader struct {
	name   string
	values []string
}

// decodeResponse parses b. allow supplies canonical header names to reuse.
func decodeResponse(b []byte, allow []string) (storedResponse, error) {
	var sr storedResponse
	if len(b) < 4 || b[0] != responseVersion {
		return sr, errCorruptResponse
	}
	sr.status = int(binary.BigEndian.Uint16(b[1:3]))
	if sr.status < 100 || sr.status > 999 {
		return sr, errCorruptResponse
	}
	d := decoder{b: b, off: 3}
	n := d.count()
	headerStart := d.off
	total := 0
	for i := 0; i < n && d.err == nil; i++ {
		d.bytes()
		k := d.count()
		total += k
		for j := 0; j < k && d.err == nil; j++ {
			d.bytes()
		}
	}
	if d.err != nil {
		return sr, d.err
	}
	sr.body = b[d.off:]
	text := string(b[headerStart:d.off]) // one allocation for all header strings
	sr.headers = make([]storedHeader, n)
	// Two more slots hold the replay header's and Content-Length's
	// values, so a replay allocates no slice of its own.
	vals := make([]string, total+2)
	sr.spare = vals[total : total+2 : total+2]
	t := decoder{b: b[:d.off], off: headerStart}
	for i := range sr.headers {
		sh := &sr.headers[i]
		sh.name = canonicalName(t.text(text, headerStart), allow)
		k := t.count()
		for j := range k {
			vals[j] = t.text(text, headerStart)
		}
		sh.values, vals = vals[:k:k], vals[k:]
	}
	return sr, nil
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

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = errCorruptResponse
		return 0
	}
	d.off += n
	return v
}

// count reads a count that cannot exceed the bytes left.
func (d *decoder) count() int {
	v := d.uvarint()
	if v > uint64(len(d.b)-d.off) {
		d.err = fmt.Errorf("%w: count %d", errCorruptResponse, v)
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	d.off += n
	return d.b[d.off-n : d.off]
}

// text returns the next field as a substring of text, which holds the
// encoded bytes from offset base on.
func (d *decoder) text(text string, base int) string {
	n := d.count()
	d.off += n
	return text[d.off-n-base : d.off-base]
}

// replay writes a stored response: status, stored headers, body and the
// replay header set to "true".
func replay(w http.ResponseWriter, sr storedResponse, replayHeader string) {
	h := w.Header()
	for _, sh := range sr.headers {
		h[sh.name] = sh.values
	}
	sr.spare[0] = "true"
	h[replayHeader] = sr.spare[0:1:1]
	writeResponse(w, h, sr.status, sr.body, sr.spare[1:2:2])
}
