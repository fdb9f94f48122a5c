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
	key, err := parseKeyBytes(v)
	return string(key), err
}

// parseKeyBytes is parseKey returning the key as bytes, which alias v
// unless the key had escapes: the middleware hashes the key into the
// engine key and keeps no copy of its own.
func parseKeyBytes(v []byte) ([]byte, error) {
	v = trimOWS(v)
	var key []byte
	var err error
	if len(v) > 0 && v[0] == '"' {
		key, err = unquote(v)
	} else {
		key, err = bare(v)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case len(key) == 0:
		return nil, fmt.Errorf("%w: empty", errBadKey)
	case len(key) > keying.MaxKeyLen:
		return nil, fmt.Errorf("%w: %d characters, at most %d", errBadKey, len(key), keying.MaxKeyLen)
	}
	return key, nil
}

// trimOWS drops the spaces and tabs around v, as bytes.Trim(v, " \t")
// does, without its cutset set-up.
func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
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
	// Eight bytes a step while all are allowed, then one at a time.
	w := v
	for len(w) >= 8 && bareChar[w[0]]&bareChar[w[1]]&bareChar[w[2]]&bareChar[w[3]]&
		bareChar[w[4]]&bareChar[w[5]]&bareChar[w[6]]&bareChar[w[7]] != 0 {
		w = w[8:]
	}
	for _, c := range w {
		if bareChar[c] == 0 {
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

// bareChar is 1 for the bytes of a bare key: the token characters, ':'
// and '/'; 0 for the others. Numbers, so that bare can AND lookups.
var bareChar = func() (t [256]byte) {
	for c := range 256 {
		if tchar[c] || c == ':' || c == '/' {
			t[c] = 1
		}
	}
	return t
}()
