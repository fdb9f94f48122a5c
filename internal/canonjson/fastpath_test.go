package canonjson

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/canonjson/canonjsontest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireSameAsReference fails t unless Canonicalize and refCanonicalize
// agree on in, with and without the testVolatile members: the same bytes,
// or errors with the same text.
func requireSameAsReference(t testing.TB, in []byte) {
	t.Helper()
	for _, volatile := range [][]string{nil, testVolatile} {
		want, wantErr := refCanonicalize(in, volatile)
		got, gotErr := Canonicalize(in, volatile)
		if wantErr != nil {
			require.Error(t, gotErr, "input %q volatile %q: reference fails with %v", in, volatile, wantErr)
			require.Equal(t, wantErr.Error(), gotErr.Error(), "input %q volatile %q", in, volatile)
			continue
		}
		require.NoError(t, gotErr, "input %q volatile %q", in, volatile)
		require.Equal(t, string(want), string(got), "input %q volatile %q", in, volatile)
	}
}

// TestCanonicalizeMemberOrder covers the boundaries of the object fast
// paths: members already in order are written as read, others reordered,
// and names compare by their decoded bytes, which for a name with escapes
// can order differently from its raw text.
func TestCanonicalizeMemberOrder(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1,"b":2}`, `{"a":1,"b":2}`},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a":1,"c":2,"b":3}`, `{"a":1,"b":3,"c":2}`},
		{`{"c":1,"b":2,"a":3}`, `{"a":3,"b":2,"c":1}`},
		{`{"a":1,"ab":2}`, `{"a":1,"ab":2}`},
		{`{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{`{"":1,"a":2}`, `{"":1,"a":2}`},
		{`{"a":1,"":2}`, `{"":2,"a":1}`},
		{`{"prefix-longer-than-16-b":1,"prefix-longer-than-16-a":2}`, `{"prefix-longer-than-16-a":2,"prefix-longer-than-16-b":1}`},
		{`{"prefix-longer-than-16-a":1,"prefix-longer-than-16-ab":2}`, `{"prefix-longer-than-16-a":1,"prefix-longer-than-16-ab":2}`},
		{`{"prefix-longer-than-16-ab":1,"prefix-longer-than-16-a":2}`, `{"prefix-longer-than-16-a":2,"prefix-longer-than-16-ab":1}`},
		// Raw, '\' (0x5c) sorts before 'b'; decoded, "z" sorts after it.
		{`{"\u007a":1,"b":2}`, `{"b":2,"z":1}`},
		{`{"b":1,"\u007a":2}`, `{"b":1,"z":2}`},
		{`{"a\u007a":1,"ab":2}`, `{"ab":2,"az":1}`},
		// Raw, "\u0061" sorts after "A"; decoded, "a" does too, but before "b".
		{`{"b":1,"\u0061":2,"A":3}`, `{"A":3,"a":2,"b":1}`},
		{`{"\n":1,"\t":2}`, `{"\t":2,"\n":1}`},
		{`{"é":1,"z":2}`, `{"z":2,"é":1}`},
		{`{"z":1,"\u00e9":2}`, `{"z":1,"é":2}`},
		{`{ "b" : 1 , "a" : { "d" : [ ] , "c" : { } } }`, `{"a":{"c":{},"d":[]},"b":1}`},
		{`{"b":{"d":1,"c":2},"a":{"f":3,"e":4}}`, `{"a":{"e":4,"f":3},"b":{"c":2,"d":1}}`},
	}
	for _, tc := range cases {
		out, err := Canonicalize([]byte(tc.in), nil)
		require.NoError(t, err, "input %s", tc.in)
		assert.Equal(t, tc.want, string(out), "input %s", tc.in)
		requireSameAsReference(t, []byte(tc.in))
	}
}

// TestCanonicalizeMembersCopiedAsWritten covers members copied from the
// input: all of them (in one piece when in order and adjacent, else one by
// one), the first ones until a member needs rewriting, or only later ones;
// a dropped member between two kept ones is never copied with them.
func TestCanonicalizeMembersCopiedAsWritten(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1,"b":"x","c":true,"d":false,"e":null,"f":-12}`, `{"a":1,"b":"x","c":true,"d":false,"e":null,"f":-12}`},
		{`{"f":-12,"e":null,"d":false,"c":true,"b":"x","a":1}`, `{"a":1,"b":"x","c":true,"d":false,"e":null,"f":-12}`},
		{`{"a":1, "b":2}`, `{"a":1,"b":2}`},
		{`{"a":1 ,"b":2}`, `{"a":1,"b":2}`},
		{`{"b":2 , "a":1}`, `{"a":1,"b":2}`},
		{`{"a" :1}`, `{"a":1}`},
		{`{"a": 1}`, `{"a":1}`},
		{`{"a":1,"b":1.0}`, `{"a":1,"b":1}`},
		{`{"b":1,"a":1.0}`, `{"a":1,"b":1}`},
		{`{"b":1.0,"a":1}`, `{"a":1,"b":1}`},
		{`{"c":1,"b":2,"a":{"y":1,"x":2},"d":4}`, `{"a":{"x":2,"y":1},"b":2,"c":1,"d":4}`},
		{`{"a":-0,"b":2}`, `{"a":0,"b":2}`},
		{`{"a":0,"b":-1}`, `{"a":0,"b":-1}`},
		{`{"a":"x\u0041","b":1}`, `{"a":"xA","b":1}`},
		{`{"\u0061":1,"b":2}`, `{"a":1,"b":2}`},
		{`{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{`{"a":1,"traceId":2,"b":3}`, `{"a":1,"b":3}`},
		{`{"a":1,"traceId":{"x":1},"b":3}`, `{"a":1,"b":3}`},
		{`{"b":1,"traceId":2,"a":3}`, `{"a":3,"b":1}`},
		{`{"traceId":1,"a":1,"b":2}`, `{"a":1,"b":2}`},
		{`{"a":1,"b":2,"traceId":3}`, `{"a":1,"b":2}`},
		{`{"traceId":1,"b":{"y":1,"x":2},"a":3}`, `{"a":3,"b":{"x":2,"y":1}}`},
		{`{"a":1,"traceId":2,"b":[1]}`, `{"a":1,"b":[1]}`},
		{`{"o":{"b":1,"a":2},"n":1}`, `{"n":1,"o":{"a":2,"b":1}}`},
		{`[{"b":1,"a":2},{"a":1,"b":2}]`, `[{"a":2,"b":1},{"a":1,"b":2}]`},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, canon(t, tc.in), "input %s", tc.in)
		requireSameAsReference(t, []byte(tc.in))
	}
	for _, in := range []string{`{"a":trueX}`, `{"a":1x}`, `{"a":"abc`, `{"a":1,"b":tru}`, `{"b":1,"a":01}`, `{"a":1,"a":2.0}`, `{"a":1,"b":2,"a":3}`} {
		_, err := Canonicalize([]byte(in), testVolatile)
		assert.Error(t, err, "input %s", in)
		requireSameAsReference(t, []byte(in))
	}
}

// TestCanonicalizeDroppedMembers: dropped members leave no comma behind
// wherever they stand, and still count for duplicates.
func TestCanonicalizeDroppedMembers(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"traceId":1}`, `{}`},
		{`{"a":1,"traceId":2,"b":3}`, `{"a":1,"b":3}`},
		{`{"traceId":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{`{"b":1,"a":2,"traceId":3}`, `{"a":2,"b":1}`},
		{`{"z":1,"traceId":{"b":1,"a":2},"a":3}`, `{"a":3,"z":1}`},
		{`{"order":{"nonce":1,"b":2,"a":3},"\u0074raceId":[1]}`, `{"order":{"a":3,"b":2}}`},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, canon(t, tc.in), "input %s", tc.in)
		requireSameAsReference(t, []byte(tc.in))
	}
}

// TestCanonicalizeDuplicateNamesFastPaths: equal names never count as
// ordered, the error names the least duplicated name, and a syntax error
// later in the object wins over a duplicate.
func TestCanonicalizeDuplicateNamesFastPaths(t *testing.T) {
	for in, name := range map[string]string{
		`{"a":1,"a":2}`:                 `"a"`,
		`{"a":1,"b":2,"b":3}`:           `"b"`,
		`{"b":1,"b":2,"a":1,"a":2}`:     `"a"`,
		`{"a":1,"\u0061":2}`:            `"a"`,
		`{"\u0061":1,"a":2}`:            `"a"`,
		`{"traceId":1,"traceId":2}`:     `"traceId"`,
		`{"x":{"a":1,"a":2},"x":3}`:     `"a"`,
		`{"\n":1,"\u000a":2}`:           `"\n"`,
		`{"c":1,"a":2,"b":3,"c":4}`:     `"c"`,
		`{"é":1,"\u00e9":2,"\u00E9":3}`: `"é"`,
	} {
		_, err := Canonicalize([]byte(in), testVolatile)
		require.ErrorIs(t, err, ErrDuplicateName, "input %s", in)
		assert.Contains(t, err.Error(), name, "input %s", in)
		requireSameAsReference(t, []byte(in))
	}
	for _, in := range []string{`{"a":1,"a":2`, `{"a":1,"a":2,}`, `{"a":1,"a":x}`, `{"b":1,"a":2,"a":3`} {
		_, err := Canonicalize([]byte(in), nil)
		assert.ErrorIs(t, err, ErrNotJSON, "input %s", in)
		assert.NotErrorIs(t, err, ErrDuplicateName, "input %s", in)
		requireSameAsReference(t, []byte(in))
	}
}

// TestCanonicalizeIntegerFastPath: integers written plainly are copied
// unless they are -0 or too long for plain form; anything else about a
// number takes the general path.
func TestCanonicalizeIntegerFastPath(t *testing.T) {
	forty := "1" + strings.Repeat("0", 39)
	for in, want := range map[string]string{
		`0`: `0`, `-0`: `0`, `7`: `7`, `-7`: `-7`, `100`: `100`, `-100`: `-100`,
		forty: forty, "-" + forty: "-" + forty, forty + "0": `1e40`, "9" + forty[1:]: "9" + forty[1:],
		"9" + forty[1:] + "1": "9." + strings.Repeat("0", 39) + "1e40",
		`1e2`:                 `100`, `1E2`: `100`, `1.0`: `1`, `10.5`: `10.5`, `-0.0`: `0`,
		`[1,-0,20]`: `[1,0,20]`, `{"b":-0,"a":10}`: `{"a":10,"b":0}`,
	} {
		assert.Equal(t, want, canon(t, in), "number %s", in)
		requireSameAsReference(t, []byte(in))
	}
	for _, in := range []string{`01`, `-01`, `-`, `--1`, `1.`, `1e`, `1x`, `[1-]`, `-a`, `00`, `1 2`, `[0x1]`} {
		_, err := Canonicalize([]byte(in), nil)
		assert.ErrorIs(t, err, ErrNotJSON, "number %s", in)
		requireSameAsReference(t, []byte(in))
	}
}

// TestCanonicalizeStringScan puts each kind of byte that ends a run of
// plain string text at each offset of strings long enough for the
// eight-byte scan, in names and in values, with text on either side.
func TestCanonicalizeStringScan(t *testing.T) {
	stops := []string{`"`, `\"`, `\\`, `\n`, `\u0041`, "\x00", "\x1f", "\t", "\x7f", "é", "\xff", "\xc3", "€", "\xe2\x82"}
	for _, stop := range stops {
		for at := range 20 {
			s := strings.Repeat("a", at) + stop + strings.Repeat("b", 19-at)
			for _, doc := range []string{
				`"` + s + `"`,
				`["` + s + `"]`,
				`{"` + s + `":1}`,
				`{"k":"` + s + `","a":1}`,
				`{"` + s + `":"` + s + `","a":"` + s + `"}`,
				`"` + s, // unterminated
			} {
				requireSameAsReference(t, []byte(doc))
			}
		}
	}
	assert.Equal(t, `{"a":"x","abcdefghij\"kl":"abcdefghijklm\n"}`,
		canon(t, `{"abcdefghij\"kl":"abcdefghijklm\u000a","a":"x"}`))
	assert.Equal(t, `["abcdefghéijklmnop"]`, canon(t, `["abcdefghéijklmnop"]`))
	for _, in := range []string{"[\"abcdefgh\x01\"]", "[\"abcdefgh\xff\"]", "{\"abcdefgh\xc3\":1}", `["abcdefgh`} {
		_, err := Canonicalize([]byte(in), nil)
		assert.ErrorIs(t, err, ErrNotJSON, "input %q", in)
	}
}

// randomDocument writes a JSON document, mostly valid, built from the
// pieces the fast paths tell apart.
func randomDocument(r *rand.Rand, b *strings.Builder, depth int) {
	names := []string{
		`""`, `"a"`, `"b"`, `"ab"`, `"aa"`, `"a\u0062"`, `"\u0061"`, `"\u007a"`, `"z"`, `"é"`, `"\u00e9"`,
		`"\n"`, `"\t"`, `"traceId"`, `"\u0074raceId"`, `"nonce"`, `"order"`, `"items"`, `"timestamp"`,
		`"prefix-longer-than-16-a"`, `"prefix-longer-than-16-ab"`, `"prefix-longer-than-16-\u0062"`, "\"\xff\"",
	}
	values := []string{
		`0`, `-0`, `1`, `-15`, `100`, `1.5`, `1e3`, `1E-3`, `10.0`, `0.0000001`, `01`, `-`, `1.`,
		`12345678901234567890123456789012345678901`, `1234567890123456789012345678901234567890`,
		`""`, `"x"`, `"book-42"`, `"a longer string value"`, `"esc\"aped\u0041"`, `"\ud83d\ude00"`, `"日本語テキスト"`,
		`true`, `false`, `null`, `tru`, "\"bad\xc3\"",
	}
	space := func() {
		if r.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[r.IntN(4)])
		}
	}
	switch k := r.IntN(10); {
	case depth < 4 && k < 5:
		b.WriteByte('{')
		space()
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			b.WriteString(names[r.IntN(len(names))])
			space()
			b.WriteByte(':')
			space()
			randomDocument(r, b, depth+1)
			space()
		}
		b.WriteByte('}')
	case depth < 4 && k < 7:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			randomDocument(r, b, depth+1)
		}
		b.WriteByte(']')
	default:
		b.WriteString(values[r.IntN(len(values))])
	}
}

// TestCanonicalizeMatchesReference compares Canonicalize with the
// canonicalizer before its fast paths on random documents, and on
// documents cut short or with one byte changed.
func TestCanonicalizeMatchesReference(t *testing.T) {
	compareRandomWithReference(t, rand.New(rand.NewPCG(7, 42)), func(r *rand.Rand, b *strings.Builder) {
		randomDocument(r, b, 0)
	})
}

// compareRandomWithReference compares Canonicalize with the reference on
// documents that generate writes (20,000, or 2,000 with -short), each
// whole, cut short, and with one byte changed.
func compareRandomWithReference(t *testing.T, r *rand.Rand, generate func(*rand.Rand, *strings.Builder)) {
	t.Helper()
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		var b strings.Builder
		generate(r, &b)
		doc := []byte(b.String())
		requireSameAsReference(t, doc)
		if len(doc) > 1 {
			requireSameAsReference(t, doc[:r.IntN(len(doc))])
			const bytes = `{}[]",:\ 0-9ae.`
			doc[r.IntN(len(doc))] = bytes[r.IntN(len(bytes))]
			requireSameAsReference(t, doc)
		}
	}
}

// TestCanonicalizeManyMembers covers objects past the insertion sort's
// limit, in each order and with each kind of member, against the
// reference.
func TestCanonicalizeManyMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for n := 11; n <= 40; n++ {
		for variant := range 6 {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("m%03d", i)
			}
			switch variant {
			case 1:
				r.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
			case 2:
				slices.Reverse(names)
			case 3:
				r.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
				names[r.IntN(n)] = names[r.IntN(n)] // maybe a duplicate
			}
			var b strings.Builder
			b.WriteByte('{')
			for i, name := range names {
				if i > 0 {
					b.WriteByte(',')
				}
				switch {
				case variant == 4 && i == n/2:
					name = `traceId` // dropped
				case variant == 5 && i%7 == 3:
					name = `\u006d` + name[1:] // escaped "m"
				}
				value := strconv.Itoa(i)
				if variant >= 4 && i%4 == 1 {
					value = `{"b":1.0,"a":[2]}`
				}
				fmt.Fprintf(&b, `"%s":%s`, name, value)
			}
			b.WriteByte('}')
			requireSameAsReference(t, []byte(b.String()))
		}
	}
}

func FuzzCanonicalizeMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"sku":"book-42","qty":1}`, `{"a":1,"b":2}`, `{"\u007a":1,"b":2}`, `{"traceId":1,"b":2,"a":3}`,
		`{"a":1,"a":2}`, `[-0,01,1e2,"abcdefghij\"kl"]`, `{"order":{"nonce":1,"b":{"y":1,"x":2}}}`,
		`{"qty":1,"sku":"book-42"}`, `{"b":1,"a":2,"b":3}`, `{"":1," ":2}`, `{"a":-0}`, `{"a":1} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		requireSameAsReference(t, in)
	})
}

// TestFlatObjectFastPath: AppendFlat handles the flat objects it is
// meant for and leaves every near miss to the parser, and Canonicalize
// agrees with the reference on all of them, with and without volatile
// members.
func TestFlatObjectFastPath(t *testing.T) {
	for _, volatile := range [][]string{nil, testVolatile} {
		root, err := Compile(volatile)
		require.NoError(t, err)
		for _, in := range canonjsontest.FlatHits {
			out, ok := AppendFlat([]byte("prefix"), []byte(in), root)
			require.True(t, ok, "input %s", in)
			want, err := refCanonicalize([]byte(in), volatile)
			require.NoError(t, err, "input %s", in)
			assert.Equal(t, "prefix"+string(want), string(out), "input %s volatile %q", in, volatile)
		}
		for _, in := range canonjsontest.FlatNearMisses {
			out, ok := AppendFlat([]byte("prefix"), []byte(in), root)
			assert.False(t, ok, "input %s", in)
			assert.Equal(t, "prefix", string(out), "input %s", in)
		}
	}
	for _, in := range append(slices.Clone(canonjsontest.FlatHits), canonjsontest.FlatNearMisses...) {
		requireSameAsReference(t, []byte(in))
	}
}

// randomFlatObject writes an object like the ones AppendFlat
// handles, now and then with one thing that sends it to the parser.
func randomFlatObject(r *rand.Rand, b *strings.Builder) {
	names := []string{`""`, `" "`, `"!"`, `"a"`, `"b"`, `"ab"`, `"aa"`, `"z"`, `"é"`, `"traceId"`, `"nonce"`,
		`"abcdefgh"`, `"abcdefghi"`, `"abcdefg"`, `"prefix-longer-than-16-a"`, `"prefix-longer-than-16-ab"`}
	values := []string{`0`, `1`, `-15`, `100`, `""`, `"x"`, `"book-42"`, `"日本語テキスト"`, `true`, `false`, `null`,
		`1234567890123456789012345678901234567890`}
	misses := []string{`-0`, `1.0`, `1e2`, `01`, `"\u0041"`, `{}`, `[1]`, ` 1`, `1 `, `tru`, `"a`, "\"ab\x01", "\"ab\xff", `"ab\`}
	b.WriteByte('{')
	for i := range r.IntN(maxFlatMembers + 2) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(names[r.IntN(len(names))])
		b.WriteByte(':')
		if r.IntN(20) == 0 {
			b.WriteString(misses[r.IntN(len(misses))])
		} else {
			b.WriteString(values[r.IntN(len(values))])
		}
	}
	b.WriteByte('}')
}

// TestFlatObjectMatchesReference compares Canonicalize with the reference
// on random flat objects, whole, cut short, and with one byte changed.
func TestFlatObjectMatchesReference(t *testing.T) {
	compareRandomWithReference(t, rand.New(rand.NewPCG(11, 5)), randomFlatObject)
}
