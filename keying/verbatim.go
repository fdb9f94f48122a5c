package keying

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// The functions in this file recognize scalar values whose canonical form
// is their own text, so that the parser can copy them, and often the
// member that holds them, as they are. Each returns the offset just past
// the value that starts at in[i], or -1 when the value is not such a
// value (or is not valid: the general parser then reports why).

// verbatimValue recognizes a string, integer or literal that is already
// canonical.
func verbatimValue(in []byte, i int) int {
	if i >= len(in) {
		return -1
	}
	switch c := in[i]; {
	case c == '"':
		return plainString(in, i)
	case c == '-' || isDigit(c):
		return plainInteger(in, i)
	case c == 't':
		return literalEnd(in, i, "true")
	case c == 'f':
		return literalEnd(in, i, "false")
	case c == 'n':
		return literalEnd(in, i, "null")
	}
	return -1
}

// Masks for plainString's eight-byte steps: the low and the high bit of
// each byte.
const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// plainString recognizes a string without escapes: the input is valid
// UTF-8, so it is canonical as written. It steps eight ASCII bytes at a
// time while it can.
func plainString(in []byte, i int) int {
	j := i + 1
	for j+8 <= len(in) {
		x := binary.LittleEndian.Uint64(in[j:])
		// A byte's high bit is set when it is not ASCII, below 0x20 (x-0x20
		// borrows), '"' or '\\' (x^c-1 borrows). A borrow only reaches
		// bytes above one that stops the run, so the lowest flagged byte is
		// the first that does.
		stop := (x | (x - 0x20*lowBits) | ((x ^ '"'*lowBits) - lowBits) | ((x ^ '\\'*lowBits) - lowBits)) & highBits
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

// plainStop returns the high bit of each of the eight bytes in x that
// stops a run of plain string text, as plainString's loop computes it:
// the lowest bit set is that of the first byte that does.
func plainStop(x uint64) uint64 {
	return (x | (x - 0x20*lowBits) | ((x ^ '"'*lowBits) - lowBits) | ((x ^ '\\'*lowBits) - lowBits)) & highBits
}

// plainStringTail is plainString byte by byte from in[j], for the string
// that starts at in[i] and holds only plain ASCII text before in[j].
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

// plainName recognizes a member name without escapes, which is
// canonical as written.
func plainName(in []byte, i int) int {
	if i >= len(in) || in[i] != '"' {
		return -1
	}
	return plainString(in, i)
}

// plainInteger recognizes an integer of at most maxPlainIntDigits digits
// without leading zeros, other than -0: the forms Canonicalize writes
// integers in.
func plainInteger(in []byte, i int) int {
	start := i
	if in[i] == '-' {
		i++
	}
	digits := i
	for i < len(in) && isDigit(in[i]) {
		i++
	}
	switch n := i - digits; {
	case n == 0 || n > maxPlainIntDigits:
		return -1
	case in[digits] == '0' && (n > 1 || digits > start): // leading zero, or -0
		return -1
	case i < len(in) && (in[i] == '.' || in[i]|0x20 == 'e'): // a fraction or exponent follows
		return -1
	}
	return i
}

// literalEnd recognizes the keyword word.
func literalEnd(in []byte, i int, word string) int {
	if len(in)-i < len(word) || string(in[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
