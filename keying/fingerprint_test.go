package keying

import (
	"encoding/hex"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSumFormat(t *testing.T) {
	f := NewFingerprinter()
	sum := f.Sum("alice", "POST /orders", nil, []byte(`{"a":1}`))
	require.Len(t, sum, 64)
	_, err := hex.DecodeString(sum)
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{64}$`, sum)
	assert.Equal(t, sum, f.Sum("alice", "POST /orders", nil, []byte(`{"a":1}`)), "deterministic")
}

func TestSumIgnoresSpelling(t *testing.T) {
	f := NewFingerprinter()
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
	f := NewFingerprinter()
	assert.NotEqual(t, f.Sum("", "", nil, []byte(`[1,2]`)), f.Sum("", "", nil, []byte(`[2,1]`)))
}

func TestSumFramesFields(t *testing.T) {
	f := NewFingerprinter()
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
	f := NewFingerprinter()
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
	f := NewFingerprinter()
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
	without := []byte(`{"a":1}`)
	def := NewFingerprinter()
	assert.NotEqual(t, def.Sum("", "", nil, body), def.Sum("", "", nil, without))
	assert.Equal(t, def.Volatile(), []string{"nonce", "random", "sign", "timestamp", "traceId"})

	extra := NewFingerprinter(WithExtraVolatile("requestTime"))
	assert.Equal(t, extra.Sum("", "", nil, body), extra.Sum("", "", nil, without))

	replaced := NewFingerprinter(WithVolatile("requestTime"))
	assert.NotEqual(t, replaced.Sum("", "", nil, body), replaced.Sum("", "", nil, without))
	assert.Equal(t, replaced.Sum("", "", nil, body), replaced.Sum("", "", nil, []byte(`{"a":1,"traceId":"x"}`)))

	none := NewFingerprinter(WithVolatile())
	assert.Empty(t, none.Volatile())
	assert.NotEqual(t, none.Sum("", "", nil, []byte(`{"nonce":1}`)), none.Sum("", "", nil, []byte(`{}`)))

	both := NewFingerprinter(WithVolatile("x"), WithExtraVolatile("y", "x"))
	assert.Equal(t, []string{"x", "y"}, both.Volatile())

	var zero Fingerprinter
	assert.Equal(t, def.Sum("p", "o", nil, body), zero.Sum("p", "o", nil, body), "zero value uses the defaults")
	assert.Equal(t, def.Volatile(), zero.Volatile())
}

func TestFingerprinterOptionsDoNotAlias(t *testing.T) {
	fields := []string{"a"}
	opt := WithVolatile(fields...)
	fields[0] = "b"
	f := NewFingerprinter(opt)
	assert.Equal(t, []string{"a"}, f.Volatile())
	f.Volatile()[0] = "z"
	assert.Equal(t, []string{"a"}, f.Volatile())
	DefaultVolatile()[0] = "z"
	assert.Contains(t, DefaultVolatile(), "traceId")
	g := NewFingerprinter(opt, WithExtraVolatile("c"))
	h := NewFingerprinter(opt, WithExtraVolatile("d"))
	assert.Equal(t, []string{"a", "c"}, g.Volatile())
	assert.Equal(t, []string{"a", "d"}, h.Volatile())
}

func TestSumConcurrent(t *testing.T) {
	f := NewFingerprinter()
	body := []byte(`{"b":[1,2,{"nonce":3,"c":"d"}],"a":"x"}`)
	want := f.Sum("p", "o", url.Values{"q": {"1"}}, body)
	const goroutines = 16
	var wg sync.WaitGroup
	results := make([][]string, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for range 200 {
				results[g] = append(results[g], f.Sum("p", "o", url.Values{"q": {"1"}}, body))
			}
		})
	}
	wg.Wait()
	for _, rs := range results {
		for _, r := range rs {
			require.Equal(t, want, r)
		}
	}
}
