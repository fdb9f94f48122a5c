package httpcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// stored is a response as a test encodes it.
type stored struct {
	status  int
	names   []string
	values  [][]string
	body    []byte
	offsets []int // where each count and length of the encoding starts
}

// encode encodes s (reencode) and records where each count and length
// starts.
func (s *stored) encode() []byte {
	b := reencode(*s)
	// The offsets of every count and length, by a plain walk.
	s.offsets = s.offsets[:0]
	off := 3
	next := func() int {
		s.offsets = append(s.offsets, off)
		u, n := binary.Uvarint(b[off:])
		off += n
		return int(u)
	}
	for range next() {
		off += next()
		for range next() {
			off += next()
		}
	}
	return b
}

// decodeAll decodes b and reads every header, as the adapters do.
func decodeAll(b []byte) (stored, error) {
	r, err := Decode(b)
	if err != nil {
		return stored{}, err
	}
	s := stored{status: r.Status, body: r.Body}
	for range r.Headers {
		s.names = append(s.names, string(r.Field()))
		var vs []string
		for range r.Count() {
			vs = append(vs, string(r.Field()))
		}
		s.values = append(s.values, vs)
	}
	return s, nil
}

// reencode encodes what decodeAll returned.
func reencode(s stored) []byte {
	b := StartResponse(nil, s.status)
	for i, name := range s.names {
		b = AppendHeader(b, name, s.values[i])
	}
	return FinishResponse(b, 0, len(s.names), s.body)
}

// fromSeed builds a response from fuzz input: up to 200 headers, each with
// up to three values, cut from data.
func fromSeed(status uint16, headers uint8, data, body []byte) stored {
	s := stored{status: 100 + int(status)%900, body: body}
	for i := range int(headers) % 200 {
		n := 0
		if len(data) > 0 {
			n = int(data[0]) % (len(data) + 1)
		}
		name := string(data[:min(n, len(data))])
		data = data[min(n, len(data)):]
		vs := make([]string, i%4)
		for j := range vs {
			vs[j] = name + string(rune('a'+j))
		}
		if i%50 == 7 {
			vs = append(vs, string(make([]byte, 130+i))) // two-byte lengths
		}
		s.names = append(s.names, name)
		s.values = append(s.values, vs)
	}
	return s
}

// FuzzDecodeCorrupt corrupts valid encodings (cuts, counts and lengths
// that overrun what follows them, flipped bytes) and checks Decode: it
// never panics; what it accepts is an encoding of exactly the response it
// returns (encoding that response again gives back the input byte for
// byte), so it never returns a response that was not encoded there; and
// a cut before the body, an overrun, a wrong version or an impossible
// status is an error. The format has no checksum: a flip in a value or
// the body, or a cut in the body, is another well-formed encoding, and
// is caught only by the first property.
func FuzzDecodeCorrupt(f *testing.F) {
	f.Add(uint16(101), uint8(3), []byte("\x05Location\x03X-Tag"), []byte(`{"id":1}`), uint8(0), uint16(4), uint8(1))
	f.Add(uint16(100), uint8(130), []byte("\x02ab"), []byte{}, uint8(1), uint16(0), uint8(0x80))
	f.Add(uint16(500), uint8(9), []byte("\x09Content-Type"), bytes.Repeat([]byte("b"), 300), uint8(2), uint16(40), uint8(0xff))
	f.Fuzz(func(t *testing.T, status uint16, headers uint8, data, body []byte, op uint8, at uint16, x uint8) {
		s := fromSeed(status, headers, data, body)
		good := s.encode()
		if got, err := decodeAll(good); err != nil || !bytes.Equal(reencode(got), good) {
			t.Fatalf("valid encoding: %v", err)
		}
		bodyAt := len(good) - len(body)
		b := bytes.Clone(good)
		mustFail := false
		switch op % 4 {
		case 0: // cut
			b = b[:int(at)%len(b)]
			mustFail = len(b) < bodyAt
		case 1: // a count or length overruns what follows it
			off := s.offsets[int(at)%len(s.offsets)]
			_, n := binary.Uvarint(b[off:])
			over := binary.AppendUvarint(nil, uint64(len(b)-off-n+1+int(x)))
			b = append(append(append([]byte(nil), b[:off]...), over...), b[off+n:]...)
			mustFail = len(over) >= n // the field did not shrink: it now runs past the end
		case 2: // a flipped byte
			if x == 0 {
				x = 1
			}
			i := int(at) % len(b)
			b[i] ^= x
			st := int(binary.BigEndian.Uint16(b[1:3]))
			mustFail = i == 0 || (i < 3 && (st < 100 || st > 999))
		case 3: // bytes past the body are body: an appended byte is a
			// well-formed encoding of a longer body
			b = append(b, x)
		}
		got, err := decodeAll(b)
		switch {
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		case err != nil:
		case mustFail:
			t.Fatalf("op %d at %d: corrupt % x accepted", op%4, at, b)
		case !bytes.Equal(reencode(got), b):
			t.Fatalf("op %d at %d: % x decodes to a response whose encoding is % x", op%4, at, b, reencode(got))
		}
	})
}

// Decode refuses a count or a length written in more bytes than it
// needs (binary.Uvarint reads 0x80 0x00 as 0): every response has one
// encoding, so a corruption that makes a longer form of a count is not
// taken for it.
func TestDecodeRefusesLongFormCounts(t *testing.T) {
	for _, b := range [][]byte{
		{1, 0, 200, 0x80, 0x00},                    // no headers, in two bytes
		{1, 0, 200, 1, 0x81, 0x00, 'a', 0},         // a one-byte name length in two
		{1, 0, 200, 1, 1, 'a', 0x80, 0x80, 0x00},   // no values, in three bytes
		{1, 0, 200, 1, 1, 'a', 1, 0x81, 0x00, 'v'}, // a value length in two
	} {
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("% x: %v, want ErrCorrupt", b, err)
		}
	}
	if _, err := Decode([]byte{1, 0, 200, 1, 1, 'a', 1, 1, 'v'}); err != nil {
		t.Fatalf("short forms: %v", err)
	}
}
