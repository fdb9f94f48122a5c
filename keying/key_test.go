package keying

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodedPart is one part recovered from a key: a literal, or a digest.
type decodedPart struct {
	literal string
	digest  string
	hashed  bool
}

// decodeKey inverts Key's framing independently of its implementation: it
// splits on ':' and undoes each part's form. It fails on any text Key must
// never produce.
func decodeKey(t testing.TB, key string) []decodedPart {
	t.Helper()
	var out []decodedPart
	for seg := range strings.SplitSeq(key, ":") {
		out = append(out, decodeSegment(t, seg))
	}
	return out
}

// decodeSegment undoes the encoding of one part.
func decodeSegment(t testing.TB, seg string) decodedPart {
	t.Helper()
	switch {
	case seg == "%":
		return decodedPart{}
	case strings.HasPrefix(seg, "#"):
		require.Len(t, seg, 33, "digest segment %q", seg)
		_, err := base64.RawURLEncoding.DecodeString(seg[1:])
		require.NoError(t, err, "digest segment %q", seg)
		return decodedPart{digest: seg[1:], hashed: true}
	}
	require.NotEmpty(t, seg, "empty segment")
	require.LessOrEqual(t, len(seg), 48)
	lit, err := unescapeLiteral(seg)
	require.NoError(t, err, "literal segment %q", seg)
	return decodedPart{literal: lit}
}

// unescapeLiteral decodes %XX escapes, rejecting any byte Key escapes or
// never writes.
func unescapeLiteral(seg string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) {
				return "", fmt.Errorf("short escape")
			}
			v, err := strconv.ParseUint(seg[i+1:i+3], 16, 8)
			if err != nil || strings.ToUpper(seg[i+1:i+3]) != seg[i+1:i+3] {
				return "", fmt.Errorf("bad escape %q", seg[i:i+3])
			}
			if !strings.ContainsRune("%:#{} ", rune(v)) {
				return "", fmt.Errorf("needless escape %q", seg[i:i+3])
			}
			b.WriteByte(byte(v))
			i += 2
		case c <= 0x20 || c > 0x7e || strings.IndexByte(":#{}", c) >= 0:
			return "", fmt.Errorf("raw byte %q", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// expectedDigest is the digest text Key must write for p.
func expectedDigest(p string) string {
	sum := sha256.Sum256([]byte("idemkit/keying/part\x00" + p))
	return base64.RawURLEncoding.EncodeToString(sum[:24])
}

// checkKey verifies that Key(parts...) decodes back to parts exactly.
func checkKey(t testing.TB, parts []string) string {
	t.Helper()
	key := Key(parts...)
	if len(parts) == 0 {
		require.Empty(t, key)
		return key
	}
	got := decodeKey(t, key)
	require.Len(t, got, len(parts), "key %q", key)
	for i, p := range parts {
		if got[i].hashed {
			assert.Equal(t, expectedDigest(p), got[i].digest, "part %d %q", i, p)
			continue
		}
		assert.Equal(t, p, got[i].literal, "part %d of key %q", i, p)
	}
	require.LessOrEqual(t, len(key), 49*len(parts)-1)
	return key
}

func TestKeyReadableForms(t *testing.T) {
	cases := []struct {
		parts []string
		want  string
	}{
		{[]string{"idem", "user-42", "POST /orders"}, "idem:user-42:POST%20/orders"},
		{[]string{"a:b"}, "a%3Ab"},
		{[]string{"a", "b"}, "a:b"},
		{[]string{"a", ""}, "a:%"},
		{[]string{"a"}, "a"},
		{[]string{""}, "%"},
		{[]string{"", ""}, "%:%"},
		{[]string{"%"}, "%25"},
		{[]string{"#x"}, "%23x"},
		{[]string{"{tag}"}, "%7Btag%7D"},
		{[]string{"GET /v1/items/{id}"}, "GET%20/v1/items/%7Bid%7D"},
		{[]string{"~!$&'()*+,;=?@[]\\^`|\"<>"}, "~!$&'()*+,;=?@[]\\^`|\"<>"},
		{nil, ""},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Key(tc.parts...), "parts %q", tc.parts)
		checkKey(t, tc.parts)
	}
}

func TestKeyDigestForms(t *testing.T) {
	long := strings.Repeat("x", 49)
	cases := []string{
		long,
		strings.Repeat("x", 65),
		strings.Repeat(":", 17), // 51 escaped bytes
		"caf\u00e9",
		"a\x00b",
		"tab\there",
		"del\x7f",
		Hidden("secret"),
		Hidden(""),
	}
	for _, p := range cases {
		key := Key(p)
		assert.Equal(t, "#"+expectedDigest(p), key, "part %q", p)
	}
	assert.Equal(t, strings.Repeat("x", 48), Key(strings.Repeat("x", 48)), "48 bytes stay literal")
	assert.Equal(t, strings.Repeat("%3A", 16), Key(strings.Repeat(":", 16)), "48 escaped bytes stay literal")
}

func TestKeyBounded(t *testing.T) {
	huge := strings.Repeat("\xff", 1<<20)
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = strings.Repeat(":", 16) // longest literal form
	}
	assert.Equal(t, 8*48+7, len(Key(parts...)))
	assert.Less(t, len(Key(parts...)), 400)
	for i := range parts {
		parts[i] = huge
	}
	assert.Equal(t, 8*33+7, len(Key(parts...)))
}

func TestHidden(t *testing.T) {
	secret := "alice@example.com"
	h := Hidden(secret)
	assert.NotContains(t, h, secret)
	assert.NotEqual(t, secret, h)
	assert.Equal(t, h, Hidden(secret), "deterministic")
	assert.NotEqual(t, h, Hidden(secret+"x"))
	assert.NotEqual(t, Hidden(h), h)
	key := Key("idem", h)
	assert.NotContains(t, key, secret)
	assert.True(t, strings.HasPrefix(key, "idem:#"))
	assert.NotEqual(t, Key("idem", secret), key)
	assert.Equal(t, Hidden(""), Hidden(""))
	assert.NotEqual(t, Key(Hidden("")), Key(""))
	for _, s := range []string{"", "a", "x", strings.Repeat("b", 100)} {
		assert.Equal(t, byte('#'), Key(Hidden(s))[0], "Hidden(%q) is never literal", s)
	}
}

// adversarialTuples are part lists that naive joins confuse.
var adversarialTuples = [][]string{
	{}, {""}, {"", ""}, {"", "", ""}, {"a"}, {"a", ""}, {"", "a"}, {"a", "", ""},
	{"a:b"}, {"a", "b"}, {"a:", "b"}, {"a", ":b"}, {"a::b"}, {"a", "", "b"}, {"a:", ":b"},
	{"a%3Ab"}, {"a%3A", "b"}, {"%"}, {"%%"}, {"%", ""}, {"", "%"}, {"%25"}, {"%2"}, {"%3A"},
	{"#"}, {"#", ""}, {"#" + expectedDigest("x")}, {strings.Repeat("x", 49)},
	{"%23" + expectedDigest("x")}, {"%23"}, {"{"}, {"}"}, {"{a}"}, {"%7Ba%7D"},
	{"a b"}, {"a%20b"}, {"a", " b"}, {" "}, {"\x00"}, {"\x00", ""}, {"", "\x00"}, {"a\x00b"},
	{"a", "\x00b"}, {"\u00e9"}, {"e\u0301"}, {"\xff"}, {"\xc3", "\xa9"}, {"\xc3\xa9", ""},
	{strings.Repeat("y", 48)}, {strings.Repeat("y", 48) + "y"}, {strings.Repeat("y", 24), strings.Repeat("y", 25)},
	{strings.Repeat(":", 16)}, {strings.Repeat(":", 17)}, {strings.Repeat(":", 8), strings.Repeat(":", 8)},
	{Hidden("a")}, {"a", Hidden("")}, {Hidden("a"), ""}, {Hidden(Hidden("a"))},
	{"principal", "op"}, {"principal:op"}, {"principal", "op", ""}, {"principal%3Aop"},
}

func TestKeyAdversarialTuplesAreInjective(t *testing.T) {
	seen := map[string][]string{}
	for _, parts := range adversarialTuples {
		key := checkKey(t, parts)
		if prev, ok := seen[key]; ok {
			t.Fatalf("key %q for both %q and %q", key, prev, parts)
		}
		seen[key] = parts
	}
	assert.Len(t, seen, len(adversarialTuples))
}

func TestKeyRandomTuplesAreInjective(t *testing.T) {
	const alphabet = ":%#{} a3AF\x00\xff"
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]string{}
	for range 20000 {
		parts := randomTuple(rng, alphabet)
		key := checkKey(t, parts)
		id := fmt.Sprintf("%q", parts)
		if prev, ok := seen[key]; ok && prev != id {
			t.Fatalf("key %q for both %s and %s", key, prev, id)
		}
		seen[key] = id
	}
	assert.Greater(t, len(seen), 12000, "generator produced too few distinct tuples")
}

// randomTuple returns 0 to 4 parts of 0 to 6 bytes from alphabet, now and
// then one long enough to be digested.
func randomTuple(rng *rand.Rand, alphabet string) []string {
	parts := make([]string, rng.IntN(5))
	for i := range parts {
		n := rng.IntN(7)
		if rng.IntN(20) == 0 {
			n = 14 + rng.IntN(40)
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		parts[i] = string(b)
	}
	return parts
}

func FuzzKey(f *testing.F) {
	f.Add("a:b", uint8(1), uint8(2))
	f.Add("%3A#", uint8(0), uint8(4))
	f.Add("", uint8(0), uint8(0))
	f.Add("{tag}:x\x00y", uint8(3), uint8(5))
	f.Add(strings.Repeat("z", 60), uint8(48), uint8(49))
	f.Add("\xff\xfe:%", uint8(2), uint8(1))
	f.Fuzz(func(t *testing.T, s string, i, j uint8) {
		a, b := splitAt(s, int(i)), splitAt(s, int(j))
		checkKey(t, a)
		checkKey(t, b)
		checkKey(t, []string{s})
		if !slices.Equal(a, b) {
			assert.NotEqual(t, Key(a...), Key(b...), "%q vs %q", a, b)
		}
		assert.NotEqual(t, Key(s), Key(s, ""))
		assert.NotEqual(t, Key(a...), Key(s))
	})
}

// splitAt splits s into two parts at i modulo len(s)+1.
func splitAt(s string, i int) []string {
	i %= len(s) + 1
	return []string{s[:i], s[i:]}
}

// AppendKey appends exactly Key's text; Key is the same for keys longer
// than its stack buffer.
func TestAppendKey(t *testing.T) {
	long := strings.Repeat("x", 60)
	for _, parts := range [][]string{{"a"}, {"a", ""}, {"http", "a:b c%"}, {"\x00secret"}, {long},
		{long, long, long, long, long, long, long, long, "tail"}} {
		k := Key(parts...)
		assert.Equal(t, "pre"+k, string(AppendKey([]byte("pre"), parts...)), "%q", parts)
		assert.Equal(t, k, string(AppendKey(nil, parts...)))
	}
	many := make([]string, 12)
	for i := range many {
		many[i] = strings.Repeat("y", 40) + string(rune('a'+i))
	}
	k := Key(many...)
	require.Greater(t, len(k), 256)
	assert.Equal(t, strings.Join(many, ":"), k, "literal parts joined as they are")
}

// TestKeyEveryByte: every byte value, alone, between others, next to a
// separator and at the lengths where a part turns from literal to digest
// (16/17 bytes that escape to three, 48/49 that do not, and around the
// 236 bytes that appendDigest hashes from its stack buffer), decodes back
// to its parts, and no two of these part lists share a key.
func TestKeyEveryByte(t *testing.T) {
	seen := map[string]string{}
	add := func(parts ...string) {
		key := checkKey(t, parts)
		id := fmt.Sprintf("%q", parts)
		if prev, ok := seen[key]; ok && prev != id {
			t.Fatalf("key %q for both %s and %s", key, prev, id)
		}
		seen[key] = id
	}
	for c := range 256 {
		b := string([]byte{byte(c)})
		add(b)
		add("a" + b + "z")
		add(b, "")
		add("", b)
		add("a", b+":z")
		add("a:"+b, "z")
		for _, n := range []int{16, 17, 47, 48, 49, 235, 236, 237, 300} {
			add(strings.Repeat(b, n))
			add(strings.Repeat("x", n-1) + b)
		}
	}
	add(":")
	add("", "")
	add("%", "")
	add("", "%")
}

// TestLiteralLenEveryPosition puts a byte that is escaped, or that forces
// the digest form, at every position of plain parts of every length up to
// the literal limit (and one past it), and checks literalLen against a
// byte-at-a-time count: its eight-byte steps must see the byte wherever
// it falls.
func TestLiteralLenEveryPosition(t *testing.T) {
	reference := func(p string) int {
		n := 0
		for i := 0; i < len(p); i++ {
			w := literalWidth[p[i]]
			if w == 0 {
				return -1
			}
			n += int(w)
		}
		if len(p) > maxLiteralLen || n > maxLiteralLen {
			return -1
		}
		return n
	}
	for size := 1; size <= maxLiteralLen+1; size++ {
		plain := strings.Repeat("a", size)
		if got, want := literalLen(plain), reference(plain); got != want {
			t.Fatalf("%d plain bytes: literalLen %d, want %d", size, got, want)
		}
		for pos := range size {
			for _, c := range []byte{escapeByte, separator, ' ', 0x7f, 0x00, 0xc3} {
				p := plain[:pos] + string(c) + plain[pos+1:]
				if got, want := literalLen(p), reference(p); got != want {
					t.Fatalf("%d bytes, %#x at %d: literalLen %d, want %d", size, c, pos, got, want)
				}
			}
		}
	}
}

// refPart is a part's encoded form written plainly from the package
// documentation, section "Key encoding", one byte at a time: the
// reference for Key's and AppendKey's fast paths.
func refPart(p string) string {
	if p == "" {
		return "%"
	}
	var lit strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c < 0x20 || c > 0x7e:
			return "#" + expectedDigest(p)
		case strings.IndexByte("%:#{} ", c) >= 0:
			fmt.Fprintf(&lit, "%%%02X", c)
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 48 {
		return "#" + expectedDigest(p)
	}
	return lit.String()
}

// TestAppendKeyEveryPosition puts every byte value at every position of
// parts of every length up to one past the literal limit: AppendKey's
// check for a part with nothing to escape looks at eight bytes a step,
// and must agree with refPart, the plain reference, wherever the byte
// falls.
func TestAppendKeyEveryPosition(t *testing.T) {
	for size := 1; size <= maxLiteralLen+1; size++ {
		plain := strings.Repeat("a", size)
		for pos := range size {
			for c := range 256 {
				p := plain[:pos] + string(byte(c)) + plain[pos+1:]
				want := "x:" + refPart(p)
				if got := string(AppendKey([]byte("x:"), p)); got != want {
					t.Fatalf("%d bytes, %#x at %d: AppendKey %q, want %q", size, c, pos, got, want)
				}
				if got := string(AppendKey(nil, "x", p)); got != want {
					t.Fatalf("%d bytes, %#x at %d, second part: AppendKey %q, want %q", size, c, pos, got, want)
				}
			}
		}
	}
}
