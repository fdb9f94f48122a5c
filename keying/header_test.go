package keying

import (
	"errors"
	"fmt"
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
