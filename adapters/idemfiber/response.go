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
	r := reader{b: b[:bodyAt], off: 3}
	for range r.uvarint() {
		name := r.field()
		for i := range r.uvarint() {
			if i == 0 {
				// Stored names are as fasthttp held them when recording:
				// normalizing them again would change nothing.
				resp.Header.SetCanonical(name, r.field())
			} else {
				resp.Header.AddBytesKV(name, r.field())
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
	r := reader{b: b, off: 3}
	for range r.uvarint() {
		r.field()
		for range r.uvarint() {
			r.field()
		}
	}
	if r.bad {
		return 0, errCorruptResponse
	}
	return r.off, nil
}

// reader reads uvarint-framed fields; once bad, it returns zero values.
type reader struct {
	b   []byte
	off int
	bad bool
}

// uvarint reads a count or length, which cannot exceed the bytes left.
// Most are under 128, one byte: that case is read inline.
func (r *reader) uvarint() uint64 {
	if !r.bad && r.off < len(r.b) && r.b[r.off] < 0x80 && int(r.b[r.off]) <= len(r.b)-r.off-1 {
		r.off++ // one byte (a value under 128), within bounds
		return uint64(r.b[r.off-1])
	}
	return r.slowUvarint()
}

func (r *reader) slowUvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || v > uint64(len(r.b)-r.off-n) {
		r.bad = true
		return 0
	}
	r.off += n
	return v
}

func (r *reader) field() []byte {
	n := int(r.uvarint())
	r.off += n
	return r.b[r.off-n : r.off]
}
