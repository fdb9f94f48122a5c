package b64url

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// check fails t unless Append16 appends what encoding/base64 does, both
// to an empty buffer and after a prefix that leaves spare capacity.
func check(t *testing.T, src [16]byte) {
	t.Helper()
	want := base64.RawURLEncoding.EncodeToString(src[:])
	if got := string(Append16(nil, src)); got != want {
		t.Fatalf("Append16(%x) = %q, want %q", src, got, want)
	}
	prefix := make([]byte, 3, 64)
	copy(prefix, "ab:")
	if got := string(Append16(prefix, src)); got != "ab:"+want {
		t.Fatalf("Append16(%q, %x) = %q, want %q", prefix, src, got, "ab:"+want)
	}
}

func TestAppend16Edges(t *testing.T) {
	var zero, ones [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	check(t, zero)
	check(t, ones)
	for pos := range 16 {
		for v := range 256 {
			var src [16]byte
			src[pos] = byte(v)
			check(t, src)
			src = ones
			src[pos] = byte(v)
			check(t, src)
		}
	}
}

// TestAppend16EachDigit sets each 6-bit group of the input to each value,
// so every alphabet entry is checked at every output position.
func TestAppend16EachDigit(t *testing.T) {
	for group := range 22 {
		for v := range 64 {
			var src [16]byte
			bit := group * 6 // first bit of the group, from the most significant
			for i := range 6 {
				if v>>(5-i)&1 == 1 && bit+i < 128 {
					src[(bit+i)/8] |= 0x80 >> ((bit + i) % 8)
				}
			}
			check(t, src)
		}
	}
}

func TestAppend16Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var src [16]byte
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		check(t, src)
	}
}

func TestAppend16KeepsPrefixAndGrows(t *testing.T) {
	dst := []byte("x")
	out := Append16(dst[:1:1], [16]byte{1})
	if string(out[:1]) != "x" || len(out) != 23 {
		t.Fatalf("Append16 on a full buffer = %q", out)
	}
	spare := make([]byte, 1, 40)
	out = Append16(spare, [16]byte{1})
	if &out[0] != &spare[0] {
		t.Fatal("Append16 reallocated a buffer with room for the text")
	}
}

func BenchmarkAppend16(b *testing.B) {
	var dst [22]byte
	src := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	b.ReportAllocs()
	for b.Loop() {
		Append16(dst[:0], src)
	}
}

func BenchmarkRawURLEncoding16(b *testing.B) {
	var dst [22]byte
	src := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	b.ReportAllocs()
	for b.Loop() {
		base64.RawURLEncoding.AppendEncode(dst[:0], src[:])
	}
}
