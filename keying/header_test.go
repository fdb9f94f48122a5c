package keying

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// parseBoth parses in as a string and as bytes, and fails the test when
// the two forms disagree.
func parseBoth(t *testing.T, in string) (string, error) {
	t.Helper()
	s, serr := ParseKeyHeader(in)
	b, berr := ParseKeyHeader([]byte(in))
	if s != string(b) || (serr == nil) != (berr == nil) || serr != nil && serr.Error() != berr.Error() {
		t.Fatalf("ParseKeyHeader(%q): string form %q, %v; bytes form %q, %v", in, s, serr, b, berr)
	}
	return s, serr
}

func TestParseKeyHeader(t *testing.T) {
	good := map[string]string{
		"0a1b2c3d-0000-4000-8000-000000000001": "0a1b2c3d-0000-4000-8000-000000000001",
		`  abc  `:                              "abc",
		`"a b\"c\\d"`:                          `a b"c\d`,
		`"plain text"`:                         "plain text",
		"urn:key/1":                            "urn:key/1",
		strings.Repeat("k", 255):               strings.Repeat("k", 255),
	}
	for in, want := range good {
		if got, err := parseBoth(t, in); err != nil || got != want {
			t.Errorf("ParseKeyHeader(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", `""`, "a,b", "a b", `"abc`, `"a\x"`, `"a"b"`, "caf\xc3\xa9", "a\x01", strings.Repeat("k", 256)} {
		if _, err := parseBoth(t, in); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("ParseKeyHeader(%q): err = %v, want ErrMalformedKey", in, err)
		} else if len(in) > 3 && strings.Contains(err.Error(), in) {
			t.Errorf("ParseKeyHeader(%q): the error quotes the key: %v", in, err)
		}
	}
}

// TestParseKeyHeaderBareEveryPosition puts a byte that a bare key cannot
// hold at each position of keys of every length up to a long one, and each
// byte that it can hold into a key of every length: isBareKey checks
// several bytes a step, its last step overlapping the one before, and
// none may be skipped.
func TestParseKeyHeaderBareEveryPosition(t *testing.T) {
	for n := 1; n <= 41; n++ {
		for i := range n {
			for _, c := range []byte{',', ' ', '"', '(', '@', '[', '\\', '{', '}', 0x01, 0x7f, 0x80, 0xc3, 0xff} {
				k := []byte(strings.Repeat("k", n))
				k[i] = c
				if i == 0 && c == '"' || (i == 0 || i == n-1) && c == ' ' {
					continue // a quoted string, or a space trimmed as OWS
				}
				_, err := parseBoth(t, string(k))
				if !errors.Is(err, ErrMalformedKey) {
					t.Errorf("byte %q at %d of %d: err = %v, want ErrMalformedKey", c, i, n, err)
				} else if c >= 0x20 && c < 0x7f && !strings.Contains(err.Error(), fmt.Sprintf("%q", c)) {
					t.Errorf("byte %q at %d of %d: err = %v, want one naming it", c, i, n, err)
				}
			}
			for c := range 256 {
				if bareKeyByte[c] == 0 {
					continue
				}
				k := []byte(strings.Repeat("k", n))
				k[i] = byte(c)
				if got, err := parseBoth(t, string(k)); err != nil || got != string(k) {
					t.Errorf("byte %q at %d of %d: ParseKeyHeader = %q, %v", byte(c), i, n, got, err)
				}
			}
		}
	}
}

// TestParseKeyHeaderBytesAllocateNothing: a key without escapes is a part
// of the value it was read from.
func TestParseKeyHeaderBytesAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocations")
	}
	for _, k := range []string{"0a1b2c3d-0000-4000-8000-000000000001", ` "0a1b2c3d" `} {
		v := []byte(k)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := ParseKeyHeader(v); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("ParseKeyHeader(%q): %v allocations", k, n)
		}
	}
}

// refParseKey is ParseKeyHeader written plainly, one byte at a time, from
// its documentation: an sf-string or a bare run of token characters, ':'
// and '/', with spaces and tabs around it, holding 1 to MaxKeyLen
// bytes. It reports whether v is accepted and, if so, the key.
func refParseKey(v string) (string, bool) {
	v = strings.Trim(v, " \t")
	var key []byte
	if strings.HasPrefix(v, `"`) {
		closed := false
		for i := 1; i < len(v); i++ {
			switch c := v[i]; {
			case closed: // data after the closing quote
				return "", false
			case c == '"':
				closed = true
			case c == '\\':
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", false
				}
				key = append(key, v[i])
			case c < 0x20 || c > 0x7e:
				return "", false
			default:
				key = append(key, c)
			}
		}
		if !closed {
			return "", false
		}
	} else {
		for i := 0; i < len(v); i++ {
			c := v[i]
			alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
			if !alnum && strings.IndexByte("!#$%&'*+-.^_`|~:/", c) < 0 {
				return "", false
			}
		}
		key = []byte(v)
	}
	return string(key), len(key) >= 1 && len(key) <= MaxKeyLen
}

// keyErrorText matches every text ParseKeyHeader may return: fixed
// reasons, a length, or the one byte that is not allowed, never more of
// the value.
var keyErrorText = regexp.MustCompile(`^malformed value: (empty|\d+ characters, at most 255|unterminated string|invalid escape|` +
	`unescaped quote inside the string|non-printable character|'(\\.|[^\\]|\\x[0-9a-f]{2})' is not allowed outside a quoted string)$`)

// FuzzParseKeyHeader compares both forms of ParseKeyHeader with
// refParseKey: the same key for a value it accepts, an error wrapping
// ErrMalformedKey for one it refuses, with a text that quotes at most
// the one byte at fault.
func FuzzParseKeyHeader(f *testing.F) {
	for _, s := range []string{
		"0a1b2c3d-0000-4000-8000-000000000001", `  abc  `, `"a b\"c\\d"`, `"plain text"`, "urn:key/1",
		"", `""`, "a,b", "a b", `"abc`, `"a\x"`, `"a"b"`, "caf\xc3\xa9", "a\x01", "\tk\t", `"\"`, `"`,
		strings.Repeat("k", 255), strings.Repeat("k", 256), `"` + strings.Repeat("k", 255) + `"`, `"` + strings.Repeat(`\\`, 256) + `"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		want, ok := refParseKey(v)
		s, serr := ParseKeyHeader(v)
		b, berr := ParseKeyHeader([]byte(v))
		for _, got := range []struct {
			key string
			err error
		}{{s, serr}, {string(b), berr}} {
			if ok {
				if got.err != nil || got.key != want {
					t.Fatalf("ParseKeyHeader(%q) = %q, %v; want %q", v, got.key, got.err, want)
				}
				continue
			}
			if !errors.Is(got.err, ErrMalformedKey) || got.key != "" {
				t.Fatalf("ParseKeyHeader(%q) = %q, %v; want an error wrapping ErrMalformedKey", v, got.key, got.err)
			}
			if !keyErrorText.MatchString(got.err.Error()) {
				t.Fatalf("ParseKeyHeader(%q): unexpected error text %q", v, got.err)
			}
		}
		if serr != nil && berr != nil && serr.Error() != berr.Error() {
			t.Fatalf("ParseKeyHeader(%q): string form %v, bytes form %v", v, serr, berr)
		}
	})
}
