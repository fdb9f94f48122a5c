package canonjson

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// plainWord is word byte by byte: b[j+k] is byte k of the result, zero
// past the end of b.
func plainWord(b []byte, j int) uint64 {
	var x uint64
	for k := 7; k >= 0; k-- {
		x <<= 8
		if j+k < len(b) {
			x |= uint64(b[j+k])
		}
	}
	return x
}

// plainRunOf is plainRun byte by byte: the number of bytes of x, from
// the first, that are plain ASCII string text.
func plainRunOf(x uint64) int {
	for k := range 8 {
		if c := byte(x >> (8 * k)); !plainStringByte(c) || c >= utf8.RuneSelf {
			return k
		}
	}
	return 8
}

// plainKey is wordKey byte by byte.
func plainKey(x uint64, n int) uint64 {
	var key uint64
	for k := range 8 {
		key <<= 8
		if k < n {
			key |= x >> (8 * k) & 0xff
		}
	}
	return key
}

// TestWordEveryOffset reads words at every offset of inputs of every
// length up to two words, so that each branch of word (a whole word, the
// last word shifted, a short input) meets every position.
func TestWordEveryOffset(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for size := range 17 {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		for j := 0; j <= size; j++ {
			if got, want := word(b, j), plainWord(b, j); got != want {
				t.Fatalf("%d bytes, offset %d: word %#x, want %#x", size, j, got, want)
			}
		}
	}
}

// TestPlainRunEveryByte puts every byte value at every position of a word
// of plain text, then a second byte value after it, and compares plainRun
// with a byte-by-byte count: a borrow past a stopping byte must never
// hide it or flag an earlier one.
func TestPlainRunEveryByte(t *testing.T) {
	for c := range 256 {
		for k := range 8 {
			for _, d := range []byte{'a', 0x00, 0x1f, 0x20, '"', '\\', 0x7f, 0x80, 0xff} {
				x := plainWord([]byte("abcdefgh"), 0)
				x = x&^(0xff<<(8*k)) | uint64(c)<<(8*k)
				if k < 7 {
					x = x&^(0xff<<(8*(k+1))) | uint64(d)<<(8*(k+1))
				}
				if got, want := plainRun(x), plainRunOf(x); got != want {
					t.Fatalf("byte %#x at %d, then %#x: plainRun %d, want %d", c, k, d, got, want)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 3))
	for range 100000 {
		x := r.Uint64()
		if got, want := plainRun(x), plainRunOf(x); got != want {
			t.Fatalf("word %#x: plainRun %d, want %d", x, got, want)
		}
	}
}

func TestWordKeyEveryLength(t *testing.T) {
	x := plainWord([]byte("\x01\x80abc\xffyz"), 0)
	for n := range 70 {
		if got, want := wordKey(x, n), plainKey(x, n); got != want {
			t.Fatalf("n %d: wordKey %#x, want %#x", n, got, want)
		}
	}
}

// TestPlainStringEveryOffset puts each kind of byte that ends a run of
// plain text at every offset of strings up to three words long, with
// plain or non-ASCII text before it, and compares plainString with its
// byte-at-a-time reference.
func TestPlainStringEveryOffset(t *testing.T) {
	stops := []string{`"`, `\`, "\x00", "\x1f", "\x7f", "é", "\xff", "\xc3", "€", "\xe2\x82"}
	for _, lead := range []string{"", "é"} {
		for _, stop := range stops {
			for size := range 25 {
				for at := 0; at <= size; at++ {
					s := lead + strings.Repeat("a", at) + stop + strings.Repeat("a", size-at)
					for _, c := range []struct {
						in string
						i  int
					}{{`"` + s, 0}, {`"` + s + `"`, 0}, {`x"` + s + `",`, 1}} {
						in := []byte(c.in)
						if got, want := plainString(in, c.i), plainStringTail(in, c.i, c.i+1); got != want {
							t.Fatalf("%q: plainString %d, want %d", in, got, want)
						}
					}
				}
			}
		}
	}
}
