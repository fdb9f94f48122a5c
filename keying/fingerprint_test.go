package keying

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/internal/canonjson"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newFingerprinter returns NewFingerprinter(opts...), failing t on an error.
func newFingerprinter(t testing.TB, opts ...Option) *Fingerprinter {
	t.Helper()
	f, err := NewFingerprinter(opts...)
	require.NoError(t, err)
	return f
}

func TestSumFormat(t *testing.T) {
	f := newFingerprinter(t)
	for _, sum := range []string{
		f.Sum("alice", "POST /orders", nil, []byte(`{"a":1}`)),
		f.SumRaw("alice", "POST /orders", url.Values{"q": {"1"}}, []byte("raw")),
		f.SumRaw("alice", "POST /orders", nil, make([]byte, canonjson.MaxPooledBuffer+1)),
	} {
		require.Len(t, sum, SumLen)
		raw, err := base64.RawURLEncoding.DecodeString(sum)
		require.NoError(t, err)
		assert.Len(t, raw, sumBytes, "128 bits")
		assert.Equal(t, literalLen(sum), SumLen, "a fingerprint is a literal part of a Key, not digested again")
	}
	sum := f.Sum("alice", "POST /orders", nil, []byte(`{"a":1}`))
	assert.Equal(t, sum, f.Sum("alice", "POST /orders", nil, []byte(`{"a":1}`)), "deterministic")
}

// The digest of a body too large to copy into the pooled buffer is
// streamed; it must equal the one-shot digest of the same input.
func TestSumRawLargeBodyStreams(t *testing.T) {
	f := newFingerprinter(t)
	body := make([]byte, canonjson.MaxPooledBuffer+100)
	for i := range body {
		body[i] = byte(i)
	}
	in := appendHead(nil, "p", "o", url.Values{"a": {"b"}})
	in = append(append(in, bodyRaw), body...)
	assert.Equal(t, string(appendSumText(nil, sha256.Sum256(in))), f.SumRaw("p", "o", url.Values{"a": {"b"}}, body))
	assert.Equal(t, f.SumRaw("p", "o", nil, body), f.Sum("p", "o", nil, body), "not JSON: Sum hashes raw too")
}

func TestSumIgnoresSpelling(t *testing.T) {
	f := newFingerprinter(t, WithVolatile("traceId", "timestamp", "nonce", "items[].random", "items[].sign"))
	base := f.Sum("u", "op", nil, []byte(`{"amount":10,"items":[{"sku":"A","qty":1}],"traceId":"t-1","timestamp":1700000000}`))
	same := []string{
		`{"items":[{"qty":1,"sku":"A"}],"amount":10}`,
		"{ \"amount\" : 1e1 ,\n\t\"items\" : [ { \"sku\" : \"\\u0041\" , \"qty\" : 1.0 } ], \"nonce\": \"n\" }",
		`{"amount":10.00,"items":[{"sku":"A","qty":1,"random":42,"sign":"x"}],"traceId":"t-2"}`,
	}
	for _, body := range same {
		assert.Equal(t, base, f.Sum("u", "op", nil, []byte(body)), "body %s", body)
	}
	different := []string{
		`{"amount":11,"items":[{"sku":"A","qty":1}]}`,
		`{"amount":10,"items":[{"sku":"a","qty":1}]}`,
		`{"amount":"10","items":[{"sku":"A","qty":1}]}`,
		`{"amount":10,"items":[{"sku":"A","qty":1}],"extra":null}`,
		`{"amount":10,"items":[{"sku":"A","qty":1},{"sku":"A","qty":1}]}`,
		`{"amount":10,"items":[{"sku":"A","qty":1}],"TraceId":"t-1"}`,
		`{"amount":10,"items":[{"sku":"A","qty":1,"nonce":1}]}`,
		`{"amount":10,"items":[{"sku":"A","qty":1}],"random":1}`,
		`{"amount":10,"items":[]}`,
		`{"Amount":10,"items":[{"sku":"A","qty":1}]}`,
	}
	seen := map[string]string{base: "base"}
	for _, body := range different {
		sum := f.Sum("u", "op", nil, []byte(body))
		_, dup := seen[sum]
		assert.False(t, dup, "body %s collides with %s", body, seen[sum])
		seen[sum] = body
	}
}

func TestSumOrderOfArraysMatters(t *testing.T) {
	f := newFingerprinter(t)
	assert.NotEqual(t, f.Sum("", "", nil, []byte(`[1,2]`)), f.Sum("", "", nil, []byte(`[2,1]`)))
}

func TestSumFramesFields(t *testing.T) {
	f := newFingerprinter(t)
	type req struct {
		principal, op string
		params        url.Values
		body          string
	}
	reqs := []req{
		{"ab", "c", nil, ""},
		{"a", "bc", nil, ""},
		{"abc", "", nil, ""},
		{"", "abc", nil, ""},
		{"", "", nil, "abc"},
		{"a", "b", nil, "c"},
		{"a", "", nil, "bc"},
		{"", "", url.Values{"a": {"bc"}}, ""},
		{"", "", url.Values{"ab": {"c"}}, ""},
		{"", "", url.Values{"a": {"b", "c"}}, ""},
		{"", "", url.Values{"a": {"c", "b"}}, ""},
		{"", "", url.Values{"a": {"b"}, "c": {""}}, ""},
		{"", "", url.Values{"a": {"b", ""}}, ""},
		{"", "", url.Values{"a": {"", "b"}}, ""},
		{"", "", url.Values{"": {"abc"}}, ""},
		{"", "", url.Values{"": {""}}, ""},
		{"", "", url.Values{"a": {""}}, ""},
		{"\x00\x00\x00\x00\x00\x00\x00\x01a", "", nil, ""},
		{"", "", nil, "\x00"},
		{"", "", nil, `"abc"`},
	}
	seen := map[string]int{}
	for i, r := range reqs {
		sum := f.Sum(r.principal, r.op, r.params, []byte(r.body))
		if j, ok := seen[sum]; ok {
			t.Fatalf("request %d collides with request %d: %+v", i, j, r)
		}
		seen[sum] = i
	}
}

func TestSumParamsCanonical(t *testing.T) {
	f := newFingerprinter(t)
	a := url.Values{"b": {"2"}, "a": {"1", "3"}}
	b := url.Values{"a": {"1", "3"}, "b": {"2"}}
	assert.Equal(t, f.Sum("p", "o", a, nil), f.Sum("p", "o", b, nil))
	parsed, err := url.ParseQuery("b=2&a=1&a=3")
	require.NoError(t, err)
	assert.Equal(t, f.Sum("p", "o", a, nil), f.Sum("p", "o", parsed, nil))
	assert.Equal(t, f.Sum("p", "o", nil, nil), f.Sum("p", "o", url.Values{}, nil))
	assert.Equal(t, f.Sum("p", "o", nil, nil), f.Sum("p", "o", url.Values{"a": nil}, nil), "a name without values is absent")
	assert.NotEqual(t, f.Sum("p", "o", nil, nil), f.Sum("p", "o", url.Values{"a": {""}}, nil))
}

func TestSumSeparatesJSONFromRaw(t *testing.T) {
	f := newFingerprinter(t)
	for _, body := range []string{`{"a":1}`, `1`, `"x"`, `[]`, `null`} {
		assert.NotEqual(t, f.Sum("p", "o", nil, []byte(body)), f.SumRaw("p", "o", nil, []byte(body)), "body %s", body)
	}
	for _, body := range []string{``, `not json`, `{"a":1,"a":2}`, "\xff", `{"a":1} x`} {
		assert.Equal(t, f.SumRaw("p", "o", nil, []byte(body)), f.Sum("p", "o", nil, []byte(body)), "non-JSON body %q hashes raw", body)
	}
	assert.NotEqual(t, f.SumRaw("p", "o", nil, []byte(`{"b":1,"a":2}`)), f.SumRaw("p", "o", nil, []byte(`{"a":2,"b":1}`)), "SumRaw does not canonicalize")
	assert.NotEqual(t, f.Sum("p", "o", nil, []byte(`{"a":1,"a":2}`)), f.Sum("p", "o", nil, []byte(`{"a":2,"a":1}`)), "duplicates stay distinct")
	assert.Equal(t, f.Sum("p", "o", nil, nil), f.Sum("p", "o", nil, []byte{}))
}

func TestFingerprinterOptions(t *testing.T) {
	body := []byte(`{"a":1,"traceId":"x","requestTime":5}`)
	def := newFingerprinter(t)
	assert.Empty(t, def.Volatile())
	assert.NotEqual(t, def.Sum("", "", nil, body), def.Sum("", "", nil, []byte(`{"a":1,"requestTime":5}`)), "nothing dropped by default")

	window := newFingerprinter(t, WithVolatile(WindowVolatile()...), WithVolatile("requestTime"))
	assert.Equal(t, []string{"nonce", "random", "requestTime", "sign", "timestamp", "traceId"}, window.Volatile())
	assert.Equal(t, window.Sum("", "", nil, body), window.Sum("", "", nil, []byte(`{"a":1}`)))
	assert.NotEqual(t, window.Sum("", "", nil, []byte(`{"x":{"traceId":1}}`)), window.Sum("", "", nil, []byte(`{"x":{}}`)),
		"window paths are top-level only")

	both := newFingerprinter(t, WithVolatile("x", "y"), WithVolatile("x"), WithVolatile())
	assert.Equal(t, []string{"x", "y"}, both.Volatile(), "options add up, duplicates once")

	var zero Fingerprinter
	assert.Equal(t, def.Sum("p", "o", nil, body), zero.Sum("p", "o", nil, body), "zero value drops nothing")
	assert.Empty(t, zero.Volatile())
}

func TestWithVolatilePaths(t *testing.T) {
	cases := []struct {
		path, in, want string
	}{
		{"ts", `{"ts":1,"a":{"ts":2}}`, `{"a":{"ts":2}}`},
		{"meta.nonce", `{"meta":{"nonce":1,"k":2},"nonce":3}`, `{"meta":{"k":2},"nonce":3}`},
		{"items[].ts", `{"items":[{"ts":1,"q":1},{"q":2},3,{"ts":4}],"ts":5}`, `{"items":[{"q":1},{"q":2},3,{}],"ts":5}`},
		{"[].ts", `[{"ts":1,"a":2},{"b":{"ts":3}}]`, `[{"a":2},{"b":{"ts":3}}]`},
		{"m[][].x", `{"m":[[{"x":1,"y":2}],[{"x":3}]]}`, `{"m":[[{"y":2}],[{}]]}`},
		{`a\.b`, `{"a.b":1,"a":{"b":2}}`, `{"a":{"b":2}}`},
		{`a\[\]\\`, `{"a[]\\":1,"b":2}`, `{"b":2}`},
		{"é", `{"é":1,"e":2}`, `{"e":2}`},
		{"items[].ts", `{"items":{"ts":1}}`, `{"items":{"ts":1}}`},
		{"items.ts", `{"items":[{"ts":1}]}`, `{"items":[{"ts":1}]}`},
		{"meta", `{"meta":{"nonce":[1,{"x":2}]},"a":1}`, `{"a":1}`},
		{"a.b.c", `{"a":{"b":{"c":1,"d":2},"c":3}}`, `{"a":{"b":{"d":2},"c":3}}`},
	}
	for _, tc := range cases {
		out, err := Canonicalize([]byte(tc.in), []string{tc.path})
		require.NoError(t, err, "path %q", tc.path)
		assert.Equal(t, tc.want, string(out), "path %q on %s", tc.path, tc.in)
		f := newFingerprinter(t, WithVolatile(tc.path))
		assert.Equal(t, newFingerprinter(t).Sum("", "", nil, []byte(tc.want)), f.Sum("", "", nil, []byte(tc.in)), "path %q", tc.path)
	}
	out, err := Canonicalize([]byte(`{"a":{"b":1,"c":2},"d":3}`), []string{"a.b", "a", "a.c.x", "d"})
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(out), "a dropped member takes the paths below it along")
}

func TestWithVolatileRejectsMalformedPaths(t *testing.T) {
	for _, path := range []string{
		"", ".", "a.", ".a", "a..b", "[]", "a[]", "a[].", "a[]b", "a[", "a]", "a[x]", "a[]]",
		`a\`, `a\b`, `a\n`, "[][]", "a.[]", "\xff", "a.\xc3",
	} {
		_, err := NewFingerprinter(WithVolatile("ok", path))
		require.ErrorIs(t, err, ErrInvalidPath, "path %q", path)
		_, err = Canonicalize([]byte(`{}`), []string{path})
		assert.ErrorIs(t, err, ErrInvalidPath, "path %q", path)
		assert.NotErrorIs(t, err, ErrNotJSON, "path %q", path)
	}
}

func TestFingerprinterOptionsDoNotAlias(t *testing.T) {
	paths := []string{"a"}
	opt := WithVolatile(paths...)
	paths[0] = "b"
	f := newFingerprinter(t, opt)
	assert.Equal(t, []string{"a"}, f.Volatile())
	f.Volatile()[0] = "z"
	assert.Equal(t, []string{"a"}, f.Volatile())
	WindowVolatile()[0] = "z"
	assert.Contains(t, WindowVolatile(), "nonce")
	g := newFingerprinter(t, opt, WithVolatile("c"))
	h := newFingerprinter(t, opt, WithVolatile("d"))
	assert.Equal(t, []string{"a", "c"}, g.Volatile())
	assert.Equal(t, []string{"a", "d"}, h.Volatile())
}

// Sum, SumRaw and Canonicalize share pooled buffers: many goroutines
// mixing them over different bodies must each get their own answer.
func TestSumConcurrent(t *testing.T) {
	f := newFingerprinter(t, WithVolatile("b[].nonce"))
	bodies := [][]byte{
		[]byte(`{"b":[1,2,{"nonce":3,"c":"d"}],"a":"x"}`),
		[]byte(`{"a":"\u0079","b":[{"c":"e"}]}`),
		[]byte(`not json`),
		benchBody(),
		make([]byte, canonjson.MaxPooledBuffer+1),
	}
	params := url.Values{"q": {"1"}}
	type answer struct{ sum, raw, canon string }
	want := make([]answer, len(bodies))
	for i, b := range bodies {
		c, _ := Canonicalize(b, f.Volatile())
		want[i] = answer{f.Sum("p", "o", params, b), f.SumRaw("p", "o", params, b), string(c)}
	}
	const goroutines = 16
	var wg sync.WaitGroup
	results := make([][]answer, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(bodies)
				c, _ := Canonicalize(bodies[i], f.Volatile())
				results[g] = append(results[g], answer{f.Sum("p", "o", params, bodies[i]), f.SumRaw("p", "o", params, bodies[i]), string(c)})
			}
		})
	}
	wg.Wait()
	for g, rs := range results {
		for n, r := range rs {
			require.Equal(t, want[(g+n)%len(bodies)], r)
		}
	}
}

// AppendSum appends exactly Sum's text, for JSON and raw bodies alike.
func TestAppendSum(t *testing.T) {
	f := newFingerprinter(t, WithVolatile("ts"))
	params := url.Values{"q": {"1", "2"}}
	for _, body := range [][]byte{nil, []byte(`{"b":1,"ts":2}`), []byte("not json"), make([]byte, canonjson.MaxPooledBuffer+1)} {
		sum := f.Sum("alice", "POST /orders", params, body)
		require.Len(t, sum, SumLen)
		assert.Equal(t, "prefix:"+sum, string(f.AppendSum([]byte("prefix:"), "alice", "POST /orders", params, body)))
		assert.Equal(t, sum, string(f.AppendSum(nil, "alice", "POST /orders", params, body)))
		assert.Equal(t, "http:"+sum, Key("http", sum), "a fingerprint is a literal key part (idemhttp relies on it)")
	}
	for i := range 1000 { // every base64url character turns up
		sum := f.Sum("p", "o", nil, []byte{byte(i), byte(i >> 8)})
		require.Equal(t, "x:"+sum, Key("x", sum))
	}
}

// AppendSum's result is the caller's: results kept while other goroutines
// fingerprint other bodies through the same pooled parsers stay as they
// were, whether AppendSum allocated them (nil dst) or appended to dst.
func TestAppendSumOwnsItsResult(t *testing.T) {
	f := newFingerprinter(t, WithVolatile("ts"))
	bodies := [][]byte{[]byte(`{"a":1,"ts":2}`), []byte(`{"b":[1,2]}`), []byte("raw"), make([]byte, canonjson.MaxPooledBuffer+1)}
	want := make([]string, len(bodies))
	for i, b := range bodies {
		want[i] = f.Sum("p", "o", nil, b)
	}
	const goroutines = 16
	kept := make([][][]byte, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for n := range 100 {
				b := bodies[(g+n)%len(bodies)]
				kept[g] = append(kept[g], f.AppendSum(nil, "p", "o", nil, b), f.AppendSum(make([]byte, 1, 64), "p", "o", nil, b))
			}
		})
	}
	wg.Wait()
	for g, ks := range kept {
		for j, k := range ks {
			w := want[(g+j/2)%len(bodies)]
			if j%2 == 1 {
				w = "\x00" + w
			}
			require.Equal(t, w, string(k), "goroutine %d result %d", g, j)
		}
	}
}
