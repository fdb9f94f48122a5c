package idemfiber

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/keying"
)

// errBadKey is wrapped by every key parsing error. Its texts never quote
// the key, so they can go back to the client.
var errBadKey = errors.New("malformed value")

// parseKey parses a key header value: an RFC 8941 sf-string ("abc", with
// \" and \\ escapes) or a bare run of visible ASCII without delimiters (a
// UUID, base64url text). The key is the unquoted text, 1 to
// keying.MaxKeyLen printable ASCII bytes.
func parseKey(v []byte) (string, error) {
	v = bytes.Trim(v, " \t")
	var key []byte
	var err error
	if len(v) > 0 && v[0] == '"' {
		key, err = unquote(v)
	} else {
		key, err = bare(v)
	}
	if err != nil {
		return "", err
	}
	switch {
	case len(key) == 0:
		return "", fmt.Errorf("%w: empty", errBadKey)
	case len(key) > keying.MaxKeyLen:
		return "", fmt.Errorf("%w: %d characters, at most %d", errBadKey, len(key), keying.MaxKeyLen)
	}
	return string(key), nil
}

// unquote parses an sf-string; v starts with a quote.
func unquote(v []byte) ([]byte, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return nil, fmt.Errorf("%w: unterminated string", errBadKey)
	}
	in := v[1 : len(v)-1]
	if !bytes.ContainsAny(in, `"\`) {
		return in, printable(in)
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case c == '"':
			return nil, fmt.Errorf("%w: unescaped quote inside the string", errBadKey)
		case c == '\\':
			i++
			if i == len(in) || (in[i] != '"' && in[i] != '\\') {
				return nil, fmt.Errorf("%w: invalid escape", errBadKey)
			}
			out = append(out, in[i])
		case c < 0x20 || c > 0x7e:
			return nil, fmt.Errorf("%w: non-printable character", errBadKey)
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// bare accepts token characters, ':' and '/' (all printable).
func bare(v []byte) ([]byte, error) {
	for _, c := range v {
		if !isTchar(c) && c != ':' && c != '/' {
			if err := printable(v); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %q is not allowed outside a quoted string", errBadKey, c)
		}
	}
	return v, nil
}

func printable(b []byte) error {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: non-printable character", errBadKey)
		}
	}
	return nil
}
