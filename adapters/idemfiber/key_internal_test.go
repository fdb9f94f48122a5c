package idemfiber

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	good := map[string]string{
		"0a1b2c3d-0000-4000-8000-000000000001": "0a1b2c3d-0000-4000-8000-000000000001",
		`  abc  `:                              "abc",
		`"a b\"c\\d"`:                          `a b"c\d`,
		`"plain text"`:                         "plain text",
		"urn:key/1":                            "urn:key/1",
		strings.Repeat("k", 255):               strings.Repeat("k", 255),
	}
	for in, want := range good {
		if got, err := parseKey([]byte(in)); err != nil || got != want {
			t.Errorf("parseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", `""`, "a,b", "a b", `"abc`, `"a\x"`, `"a"b"`, "caf\xc3\xa9", "a\x01", strings.Repeat("k", 256)} {
		if _, err := parseKey([]byte(in)); !errors.Is(err, errBadKey) {
			t.Errorf("parseKey(%q): err = %v, want errBadKey", in, err)
		} else if len(in) > 3 && strings.Contains(err.Error(), in) {
			t.Errorf("parseKey(%q): the error quotes the key: %v", in, err)
		}
	}
}

// TestBareKeyEveryPosition puts a byte that a bare key cannot hold at each
// position of a long key: bare checks several bytes a step, and none may
// be skipped.
func TestBareKeyEveryPosition(t *testing.T) {
	const n = 41
	for i := range n {
		for _, c := range []byte{',', ' ', '"', 0x01, 0x7f, 0xc3} {
			k := []byte(strings.Repeat("k", n))
			k[i] = c
			if i == 0 && c == '"' || (i == 0 || i == n-1) && c == ' ' {
				continue // a quoted string, or a space trimmed as OWS
			}
			if _, err := parseKey(k); !errors.Is(err, errBadKey) {
				t.Errorf("byte %q at %d: err = %v, want errBadKey", c, i, err)
			}
		}
	}
}
