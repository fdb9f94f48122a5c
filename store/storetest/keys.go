package storetest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// keyCases check that keys are opaque byte strings.
func keyCases() []testCase {
	return []testCase{
		{"Keys/ArbitraryBytesStayDistinct", testArbitraryKeys},
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

func testArbitraryKeys(t *testing.T, s store.Store) {
	keys := oddKeys()
	for i, k := range keys {
		mustSet(t, s, k, []byte(strconv.Itoa(i)), longTTL)
	}
	for i, k := range keys {
		requireValue(t, s, k, []byte(strconv.Itoa(i)))
	}
	for i, k := range keys {
		v, err := s.Consume(ctxb, k)
		require.NoError(t, err, "Consume(%q)", k)
		require.Equal(t, []byte(strconv.Itoa(i)), v, "Consume(%q)", k)
		if i+1 < len(keys) {
			requireValue(t, s, keys[i+1], []byte(strconv.Itoa(i+1)))
		}
	}
}
