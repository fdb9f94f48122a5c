package httpcore

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// count must accept exactly the uvarints binary.Uvarint accepts in their
// shortest form, with the same value, when the value does not exceed the
// bytes after it, and
// Response.Count, which reads checked encodings, must read back what
// count accepted.
func TestCountMatchesUvarint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(b []byte, off int) {
		t.Helper()
		want, n := binary.Uvarint(b[off:])
		wantOK := n > 0 && want <= uint64(len(b)-off-n) && (n == 1 || b[off+n-1] != 0) // and in its shortest form
		v, next := count(b, off)
		ok := next <= len(b)
		if ok != wantOK || (ok && (uint64(v) != want || next != off+n)) || (!ok && (v != 0 || next != len(b)+1)) {
			t.Fatalf("count(% x, %d) = %d, %d; binary.Uvarint: %d, %d", b, off, v, next, want, n)
		}
		if ok {
			r := Response{b: b, off: off}
			if v2 := r.Count(); v2 != v || r.off != next {
				t.Fatalf("uvarint(% x, %d) = %d, %d, want %d, %d", b, off, v2, r.off, v, next)
			}
		}
	}
	for range 200000 {
		b := make([]byte, 1+rng.IntN(14))
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = 0x80 | byte(rng.IntN(128)) // a continuation byte
			case 1:
				b[i] = byte(rng.IntN(3)) // 0, 1 or 2: overflow at the tenth byte, or not
			default:
				b[i] = byte(rng.IntN(256))
			}
		}
		check(b, rng.IntN(len(b)))
	}
	// Every encoding of every length from 1 to 10 bytes, at the edges.
	for _, u := range []uint64{0, 1, 127, 128, 300, 1<<14 - 1, 1 << 14, 1<<63 - 1, 1 << 63, 1<<64 - 1} {
		enc := binary.AppendUvarint(nil, u)
		check(enc, 0)
		check(append(enc, make([]byte, 400)...), 0)
	}
	// A tenth byte over 1, and an eleventh byte, overflow, even when the
	// bits that fit make a small number.
	check([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 0)
	check([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0}, 0)
	check([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0)
	if _, next := count(nil, 0); next <= 0 {
		t.Fatal("count accepted no bytes")
	}
}
