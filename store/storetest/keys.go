package storetest

import (
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/store"
)

// keyCases check that keys are opaque byte strings.
func keyCases() []testCase {
	return []testCase{
		{name: "Keys/ArbitraryBytesStayDistinct", f: testArbitraryKeys},
	}
}

// oddKeys are keys that a backend might mangle: separators, glob and
// hash-tag characters, whitespace, control bytes, invalid UTF-8, non-ASCII
// and near-duplicates.
func oddKeys() []string {
	maxA := strings.Repeat("a", store.MaxKeyLen)
	maxB := maxA[:store.MaxKeyLen-1] + "b"
	return []string{
		"a", "A", "a ", " a", "a b", "a:b", "a::b", ":", "{a}", "a{b}c", "{", "}",
		"*", "?", "[a]", "a\\b", "a/b", "a\nb", "a\r\nb", "a\tb", "%s", "'", "\"",
		"\x00", "\x00\x00", "a\x00b", "\xff", "\xff\xfe", "\xc3\x28",
		"ключ", "键", "🔑", "e\u0301", "\u00e9",
		maxA, maxB,
	}
}

func testArbitraryKeys(c *checker, s store.Store) {
	keys := oddKeys()
	for i, k := range keys {
		if !c.set(s, k, []byte(strconv.Itoa(i)), longTTL) {
			return
		}
	}
	for i, k := range keys {
		c.holds(s, k, []byte(strconv.Itoa(i)), ruleKeys)
	}
	for i, k := range keys {
		v, err := s.Consume(c.ctx, k)
		call := "Consume(" + show(k) + ")"
		c.noError(err, ruleKeys, call)
		c.expect(string(v) == strconv.Itoa(i), ruleKeys, "%s = %s, want %q", call, show(v), strconv.Itoa(i))
		if i+1 < len(keys) {
			c.holds(s, keys[i+1], []byte(strconv.Itoa(i+1)), ruleKeys)
		}
	}
}
