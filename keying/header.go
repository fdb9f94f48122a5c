package keying

import "fmt"

// ParseKeyHeader parses the value of an idempotency key or token header
// (KeyHeader, TokenHeader), as every HTTP adapter reads it: an RFC 8941
// sf-string ("abc", with \" and \\ escapes) or a bare run of RFC 9110
// token characters, ':' and '/' (a UUID, base64url text), with optional
// spaces and tabs around it. The key is the unquoted text, 1 to MaxKeyLen
// printable ASCII bytes. It is a part of v unless the string had escapes,
// so parsing a []byte value allocates only then.
func ParseKeyHeader[T string | []byte](v T) (T, error) {
	v = trimSpaceTab(v)
	var key T
	var err error
	switch {
	case len(v) > 0 && v[0] == '"':
		key, err = unquoteKey(v)
	case isBareKey(v): // the common case, without bareKey's error paths
		key = v
	default:
		key, err = bareKey(v)
	}
	switch {
	case err != nil:
	case len(key) == 0:
		err = fmt.Errorf("%w: empty", ErrMalformedKey)
	case len(key) > MaxKeyLen:
		err = fmt.Errorf("%w: %d characters, at most %d", ErrMalformedKey, len(key), MaxKeyLen)
	}
	if err != nil {
		var none T
		return none, err
	}
	return key, nil
}

// trimSpaceTab returns v without the spaces and tabs around it.
func trimSpaceTab[T string | []byte](v T) T {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// unquoteKey parses an sf-string; v starts with a quote.
func unquoteKey[T string | []byte](v T) (T, error) {
	var none T
	if len(v) < 2 || v[len(v)-1] != '"' {
		return none, fmt.Errorf("%w: unterminated string", ErrMalformedKey)
	}
	in := v[1 : len(v)-1]
	escaped := false
	for i := 0; i < len(in) && !escaped; i++ {
		escaped = in[i] == '"' || in[i] == '\\'
	}
	if !escaped {
		if err := checkPrintable(in); err != nil {
			return none, err
		}
		return in, nil
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case c == '"':
			return none, fmt.Errorf("%w: unescaped quote inside the string", ErrMalformedKey)
		case c == '\\':
			i++
			if i == len(in) || (in[i] != '"' && in[i] != '\\') {
				return none, fmt.Errorf("%w: invalid escape", ErrMalformedKey)
			}
			out = append(out, in[i])
		case c < 0x20 || c > 0x7e:
			return none, fmt.Errorf("%w: non-printable character", ErrMalformedKey)
		default:
			out = append(out, c)
		}
	}
	return T(out), nil
}

// bareKey accepts a run of token characters, ':' and '/', all printable.
// It checks one byte at a time: ParseKeyHeader calls it for the error
// when isBareKey rejects v.
func bareKey[T string | []byte](v T) (T, error) {
	for i := 0; i < len(v); i++ {
		if bareKeyByte[v[i]] == 0 {
			var none T
			if err := checkPrintable(v); err != nil {
				return none, err
			}
			return none, fmt.Errorf("%w: %q is not allowed outside a quoted string", ErrMalformedKey, v[i])
		}
	}
	return v, nil
}

// isBareKey reports whether every byte of v may appear in a bare key.
func isBareKey[T string | []byte](v T) bool {
	return allMarked(v, &bareKeyByte)
}

// checkPrintable returns an error for a byte outside printable ASCII.
func checkPrintable[T string | []byte](v T) error {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return fmt.Errorf("%w: non-printable character", ErrMalformedKey)
		}
	}
	return nil
}

// bareKeyByte is 1 for the bytes a bare key may hold (the RFC 9110 token
// characters, ':' and '/'), 0 for the others: numbers, for allMarked.
var bareKeyByte = func() (t [256]uint8) {
	const marks = "!#$%&'*+-.^_`|~:/"
	for c := range 256 {
		b := byte(c)
		if 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' {
			t[c] = 1
		}
	}
	for i := range len(marks) {
		t[marks[i]] = 1
	}
	return t
}()
