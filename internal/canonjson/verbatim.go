package canonjson

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
