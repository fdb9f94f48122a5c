package idemhttp

import (
	"errors"
	"fmt"
	"strings"
)

var errBadKey = errors.New("malformed value")

// headerKey returns the single value of header name in h, parsed with
// parseKey. present reports whether the header was sent at all.
func headerKey(values []string) (key string, present bool, err error) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
		key, err = parseKey(values[0])
		return key, true, err
	default:
		return "", true, fmt.Errorf("%w: the header is repeated", errBadKey)
	}
}

// parseKey parses an idempotency key or token header value: an RFC 8941
// sf-string ("abc", with \" and \\ escapes) or a bare token of visible
// ASCII without delimiters (abc, a UUID, base64url). The key is the
// unquoted text; it must be 1 to MaxKeyLen printable ASCII characters.
func parseKey(v string) (string, error) {
	v = trimSpaceTab(v)
	var key string
	var err error
	if strings.HasPrefix(v, `"`) {
		key, err = parseSFString(v)
	} else {
		key, err = parseBare(v)
	}
	if err != nil {
		return "", err
	}
	switch {
	case key == "":
		return "", fmt.Errorf("%w: empty", errBadKey)
	case len(key) > MaxKeyLen:
		return "", fmt.Errorf("%w: %d characters, at most %d", errBadKey, len(key), MaxKeyLen)
	}
	return key, nil
}

// parseSFString parses an RFC 8941 sf-string. v starts with a quote.
func parseSFString(v string) (string, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", fmt.Errorf("%w: unterminated string", errBadKey)
	}
	inner := v[1 : len(v)-1]
	if !strings.ContainsAny(inner, `"\`) {
		if err := checkPrintable(inner); err != nil {
			return "", err
		}
		return inner, nil
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '"':
			return "", fmt.Errorf("%w: unescaped quote inside the string", errBadKey)
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", fmt.Errorf("%w: invalid escape", errBadKey)
			}
			b.WriteByte(inner[i])
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: non-printable character", errBadKey)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// parseBare accepts a run of RFC 9110 tchar, ':' and '/': every visible
// ASCII character except delimiters such as quotes, commas and spaces.
func parseBare(v string) (string, error) {
	// Eight bytes a step: the table's entries are 0 or 1, so the AND of
	// eight of them is 1 only when all eight may appear in a bare key.
	i := 0
	for ; i+8 <= len(v); i += 8 {
		w := v[i : i+8]
		if bareKeyByte[w[0]]&bareKeyByte[w[1]]&bareKeyByte[w[2]]&bareKeyByte[w[3]]&
			bareKeyByte[w[4]]&bareKeyByte[w[5]]&bareKeyByte[w[6]]&bareKeyByte[w[7]] == 0 {
			break
		}
	}
	for ; i < len(v); i++ {
		if bareKeyByte[v[i]] == 0 {
			if err := checkPrintable(v); err != nil {
				return "", err
			}
			return "", fmt.Errorf("%w: %q is not allowed outside a quoted string", errBadKey, v[i])
		}
	}
	return v, nil
}

// bareKeyByte is 1 for the bytes a bare key may hold (tchar, ':' and
// '/'), 0 for the others.
var bareKeyByte = func() (t [256]uint8) {
	for c := range 256 {
		if isTchar(byte(c)) || c == ':' || c == '/' {
			t[c] = 1
		}
	}
	return t
}()

// trimSpaceTab returns v without leading and trailing spaces and tabs
// (strings.Trim(v, " \t"), without building a cutset).
func trimSpaceTab(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

func checkPrintable(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("%w: non-printable character", errBadKey)
		}
	}
	return nil
}
