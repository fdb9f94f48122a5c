package canonjson

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// This file holds every step of the canonicalizer that reads eight bytes
// at a time, each beside the plain byte-at-a-time code it must agree
// with: stringStop and plainRun with plainStringByte, plainString with
// plainStringTail, word and wordKey with a loop over the bytes (see
// word_test.go, which compares each pair at every offset).

// Masks for the eight-byte steps: the low and the high bit of each byte.
const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// word returns the eight bytes of b from b[j], j <= len(b),
// little-endian, with zero bytes for those past the end, which stop a run
// of plain string text like control characters.
func word(b []byte, j int) uint64 {
	if j+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[j:])
	}
	if len(b) >= 8 { // the last eight bytes, shifted so that b[j] comes first
		return binary.LittleEndian.Uint64(b[len(b)-8:]) >> (8 * (j + 8 - len(b)))
	}
	var x uint64
	for k := len(b) - 1; k >= j; k-- {
		x = x<<8 | uint64(b[k])
	}
	return x
}

// stringStop returns the high bit of each of the eight bytes in x, a
// word, that stops a run of plain ASCII string text: a byte that is not
// ASCII, below 0x20 (x-0x20 borrows), '"' or '\\' (x^c-1 borrows). A
// borrow only reaches bytes above one that stops the run, so the lowest
// bit set is that of the first byte that does.
func stringStop(x uint64) uint64 {
	return (x | (x - 0x20*lowBits) | ((x ^ '"'*lowBits) - lowBits) | ((x ^ '\\'*lowBits) - lowBits)) & highBits
}

// plainRun returns how many of the eight bytes of the word x, from the
// first, are plain ASCII string text before one that stops the run: 8
// when none does.
func plainRun(x uint64) int {
	return bits.TrailingZeros64(stringStop(x)) / 8
}

// wordKey returns the first n bytes of the word x, big-endian, followed
// by zero bytes: all eight when n >= 8. Keys of byte strings compare as
// the strings' first eight bytes do, when those hold no zero byte.
func wordKey(x uint64, n int) uint64 {
	return bits.ReverseBytes64(x) &^ (^uint64(0) >> (8 * n)) // a shift of 64 or more is 0
}

// nameKey returns the key of the name b[s:e] (see flatMember).
func nameKey(b []byte, s, e int) uint64 {
	return wordKey(word(b, s), e-s)
}

// plainString recognizes a string without escapes that starts at in[i]:
// the input is valid UTF-8, so it is canonical as written. It returns the
// offset just past the closing quote, or -1. It steps eight ASCII bytes
// at a time while it can, then goes on with plainStringTail.
func plainString(in []byte, i int) int {
	j := i + 1
	for j+8 <= len(in) {
		stop := stringStop(binary.LittleEndian.Uint64(in[j:]))
		if stop == 0 {
			j += 8
			continue
		}
		j += bits.TrailingZeros64(stop) / 8
		switch {
		case in[j] == '"':
			return j + 1
		case in[j] < utf8.RuneSelf: // an escape or a control character
			return -1
		}
		break
	}
	return plainStringTail(in, i, j)
}

// plainStringTail is plainString byte by byte from in[j], for the string
// that starts at in[i] and holds only plain ASCII text before in[j];
// plainStringTail(in, i, i+1) is plainString's plain reference.
func plainStringTail(in []byte, i, j int) int {
	var seen byte // every byte ORed: 0x80 is set when one is not ASCII
	for j < len(in) && plainStringByte(in[j]) {
		seen |= in[j]
		j++
	}
	if j >= len(in) || in[j] != '"' || (seen >= utf8.RuneSelf && !utf8.Valid(in[i+1:j])) {
		return -1
	}
	return j + 1
}

// plainStringByte reports whether c stands for itself inside a string.
func plainStringByte(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\'
}
