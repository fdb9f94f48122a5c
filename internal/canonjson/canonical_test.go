package canonjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/canonjson/canonjsontest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testVolatile is the set of paths the Canonicalize tests drop.
var testVolatile = canonjsontest.Volatile

// canon canonicalizes in without the testVolatile members.
func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := Canonicalize([]byte(in), testVolatile)
	require.NoError(t, err, "input %q", in)
	return string(out)
}

func TestCanonicalizeStructure(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{" \t\r\n{ \"b\" : [ 1 , 2 ] ,\n \"a\" : { \"d\" : null , \"c\" : true } } \n", `{"a":{"c":true,"d":null},"b":[1,2]}`},
		{`[3,1,2]`, `[3,1,2]`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{` [ ] `, `[]`},
		{`{ }`, `{}`},
		{`"x"`, `"x"`},
		{`false`, `false`},
		{`{"B":1,"a":2,"_":3,"\u00e9":4,"aa":5,"":6}`, `{"":6,"B":1,"_":3,"a":2,"aa":5,"é":4}`},
		{`{"\ud83d\ude00":1,"\uffff":2}`, "{\"\uffff\":2,\"😀\":1}"}, // code point, not UTF-16, order
		{`[[[{"z":[{"y":1,"x":2}]}]]]`, `[[[{"z":[{"x":2,"y":1}]}]]]`},
		{`{"a\"b":1,"\u0022":2,"\n":3,"a/":4,"a\/b":5}`, `{"\n":3,"\"":2,"a\"b":1,"a/":4,"a/b":5}`},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, canon(t, tc.in), "input %q", tc.in)
	}
}

func TestCanonicalizeVolatile(t *testing.T) {
	in := `{"traceId":"t1","order":{"nonce":7,"sku":"x","items":[{"timestamp":1,"q":2},{"sign":"s","timestamp":0.5}]},` +
		`"meta":{"traceId":{"deep":[1]}},"TraceId":"kept","list":[[{"nonce":1}]],"nonce":2}`
	want := `{"TraceId":"kept","list":[[{}]],"meta":{"traceId":{"deep":[1]}},"nonce":2,"order":{"items":[{"q":2},{"sign":"s"}],"sku":"x"}}`
	assert.Equal(t, want, canon(t, in))
	assert.Equal(t, `[{"a":1},{"b":{"nonce":2}}]`, canon(t, `[{"nonce":1,"a":1},{"b":{"nonce":2}}]`))

	escaped := `{"\u0074raceId":1,"a":2}`
	assert.Equal(t, `{"a":2}`, canon(t, escaped), "names match after unescaping")

	out, err := Canonicalize([]byte(in), nil)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"traceId":"t1"`, "nil volatile drops nothing")

	out, err = Canonicalize([]byte(`{"a":1,"b":{"a":2},"c":[{"a":3}]}`), []string{"a"})
	require.NoError(t, err)
	assert.Equal(t, `{"b":{"a":2},"c":[{"a":3}]}`, string(out), "a bare name is a top-level member only")
}

func TestCanonicalizeNumbers(t *testing.T) {
	groups := [][]string{
		{`1`, `1.0`, `1e0`, `10E-1`, `0.1e1`, `100e-2`, `1.000E+0`, `0.00001e5`},
		{`0`, `-0`, `0.0`, `-0.0e10`, `0e-5`, `0E0`},
		{`12345678901234567890123`, `12345678901234567890123.000`, `1.2345678901234567890123e22`, `123456789012345678901230e-1`},
		{`-1.5`, `-15e-1`, `-0.15E1`, `-150e-2`},
		{`1e40`, `10e39`, `10000000000000000000000000000000000000000`},
		{`1.5e-8`, `0.000000015`, `15e-9`},
		{`1e-9999999999999999999`, `10e-10000000000000000000`},
		{`1e9999999999999999999`, `0.1e10000000000000000000`},
	}
	want := []string{
		`1`, `0`, `12345678901234567890123`, `-1.5`, `1e40`, `1.5e-8`,
		`1e-9999999999999999999`, `1e9999999999999999999`,
	}
	for i, group := range groups {
		for _, n := range group {
			assert.Equal(t, want[i], canon(t, n), "number %s", n)
		}
	}
	singles := map[string]string{
		`9007199254740993`:                         `9007199254740993`, // not representable in float64
		`1000000000000000000000000000000000000000`: `1000000000000000000000000000000000000000`,
		`0.1`:        `0.1`,
		`0.0000001`:  `0.0000001`,
		`0.00000001`: `1e-8`,
		`123.456`:    `123.456`,
		`-12345678901234567890.12345678901234567890`: `-12345678901234567890.1234567890123456789`,
		`1E400`:  `1e400`,
		`2.5e+3`: `2500`,
	}
	for in, want := range singles {
		assert.Equal(t, want, canon(t, in), "number %s", in)
	}
	assert.NotEqual(t, canon(t, `12345678901234567890123`), canon(t, `12345678901234567890124`))
	assert.NotEqual(t, canon(t, `0.1`), canon(t, `0.10000000000000001`))
}

func TestCanonicalizeStrings(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"\u0041"`, `"A"`},
		{`"\/"`, `"/"`},
		{`"\u00e9"`, `"é"`},
		{`"\u00E9"`, `"é"`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000C\u000a"`, `"\b\f\n"`},
		{`"\u0000\u001F\u007f"`, "\"\\u0000\\u001f\x7f\""},
		{`"\"\\"`, `"\"\\"`},
		{`"\u0022\u005c"`, `"\"\\"`},
		{`"<>&\u2028"`, "\"<>&\u2028\""},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, canon(t, tc.in), "input %s", tc.in)
	}
}

func TestCanonicalizeRejectsInvalid(t *testing.T) {
	invalid := []string{
		``, ` `, `{`, `}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":}`, `{1:2}`,
		`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `Infinity`, `-Infinity`,
		`tru`, `nul`, `True`, `"abc`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"a\nb\"",
		`{} {}`, `1 2`, `[1] x`, `"a""b"`, `{"a":1}garbage`, `null,`,
		"\xef\xbb\xbf{}", "\"\xff\"", "\"\xc3\"", `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`,
		`"\ud800\ud800"`, `"\ud800\"`, `'a'`, `[1 2]`,
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
	}
	for _, in := range invalid {
		_, err := Canonicalize([]byte(in), nil)
		require.Error(t, err, "input %q", in)
		assert.ErrorIs(t, err, ErrNotJSON, "input %q", in)
		assert.NotErrorIs(t, err, ErrDuplicateName, "input %q", in)
	}
	_, err := Canonicalize([]byte(strings.Repeat("[", 1000)+strings.Repeat("]", 1000)), nil)
	assert.NoError(t, err, "1000 levels are allowed")
}

func TestCanonicalizeRejectsDuplicateNames(t *testing.T) {
	dups := []string{
		`{"a":1,"a":1}`,
		`{"a":1,"b":2,"a":3}`,
		`{"a":1,"\u0061":2}`,
		`{"x":[{"k":1,"k":2}]}`,
		`{"traceId":1,"traceId":2}`,
		`{"order":{"nonce":1,"nonce":2}}`,
	}
	for _, in := range dups {
		_, err := Canonicalize([]byte(in), testVolatile)
		assert.ErrorIs(t, err, ErrDuplicateName, "input %s", in)
	}
	_, err := Canonicalize([]byte(`{"a":{"a":1},"b":{"a":2}}`), nil)
	assert.NoError(t, err, "same name in different objects")
}

func TestCanonicalizeDoesNotModifyInput(t *testing.T) {
	in := []byte(`{"b":"\u0041","a":[1.0,{"nonce":1}]}`)
	orig := string(in)
	_, err := Canonicalize(in, testVolatile)
	require.NoError(t, err)
	assert.Equal(t, orig, string(in))
}

// checkCanonical verifies the properties every canonical output must have.
func checkCanonical(t *testing.T, in []byte) {
	out, err := Canonicalize(in, testVolatile)
	if err != nil {
		if !errors.Is(err, ErrDuplicateName) {
			require.ErrorIs(t, err, ErrNotJSON)
			if json.Valid(in) {
				requireRejectable(t, in, err)
			}
		}
		return
	}
	require.True(t, json.Valid(out), "canonical output %q is not JSON", out)
	again, err := Canonicalize(out, testVolatile)
	require.NoError(t, err)
	require.Equal(t, string(out), string(again), "canonicalization is not idempotent")
	require.True(t, json.Valid(in), "accepted %q, which encoding/json rejects", in)
	requireSameMeaning(t, in)
}

// requireSameMeaning checks that, with nothing dropped, encoding/json
// decodes in and its canonical form to the same value.
func requireSameMeaning(t *testing.T, in []byte) {
	out, err := Canonicalize(in, nil)
	require.NoError(t, err)
	var want, got any
	errWant := json.Unmarshal(in, &want)
	errGot := json.Unmarshal(out, &got)
	require.Equal(t, errWant == nil, errGot == nil, "decoding %q vs %q", in, out)
	require.Equal(t, want, got, "canonical %q of %q means something else", out, in)
}

// requireRejectable fails unless err is one of the reasons Canonicalize may
// reject a document that encoding/json accepts.
func requireRejectable(t *testing.T, in []byte, err error) {
	msg := err.Error()
	ok := strings.Contains(msg, "surrogate") || strings.Contains(msg, "too deep") || strings.Contains(msg, "UTF-8")
	require.True(t, ok, "rejected valid JSON %q: %v", in, err)
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,2e3,-0,"\u0041"]}`, `[{"nonce":1,"x":{"traceId":2}}]`, `12345678901234567890123`,
		`"\ud83d\ude00"`, `{"a":1,"a":2}`, `1e-9999999999999999999`, `[1,]`, `{"\u0000":"\u001f"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkCanonical(t, in)
	})
}

// TestCanonicalizeChecksUTF8InStrings: the parser checks UTF-8 in each
// run of string text (names, values, around escapes) instead of the
// whole body first; every invalid sequence is still refused, and valid
// text outside ASCII is kept as it is.
func TestCanonicalizeChecksUTF8InStrings(t *testing.T) {
	for _, in := range []string{
		"\"\xff\"", "{\"\xc3\":1}", "{\"a\":\"x\xc3\"}", "[\"\\n\xe2\x82\"]", "\"\xed\xa0\x80\"", // lone surrogate
		"\"\xc0\xaf\"", "\"a\\u0041\xf4\x90\x80\x80\"", "[1,\xc3\xa9]", "\xef\xbb\xbf{}",
	} {
		_, err := Canonicalize([]byte(in), nil)
		assert.ErrorIs(t, err, ErrNotJSON, "input %q", in)
	}
	for in, want := range map[string]string{
		`{"é":"日本","a":"\n€"}`:   `{"a":"\n€","é":"日本"}`,
		"[\"\xf0\x9f\x98\x80\"]": "[\"\xf0\x9f\x98\x80\"]",
	} {
		out, err := Canonicalize([]byte(in), nil)
		if assert.NoError(t, err, "input %q", in) {
			assert.Equal(t, want, string(out))
		}
	}
}
