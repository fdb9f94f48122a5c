package keying

import (
	"encoding/binary"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// request is the tuple a fingerprint stands for.
type request struct {
	principal, operation string
	params               url.Values
	kind                 byte
	body                 string
}

// hashInput returns the bytes Sum and SumRaw hash for r.
func hashInput(r request) []byte {
	return append(append(appendHead(nil, r.principal, r.operation, r.params), r.kind), r.body...)
}

// decodeInput parses a hash input back into its request. That every input
// decodes to exactly the request it was built from proves the framing
// injective: two different requests never hash the same bytes.
func decodeInput(in []byte) (request, error) {
	var r request
	if !strings.HasPrefix(string(in), fingerprintDomain) {
		return r, errors.New("no domain")
	}
	in = in[len(fingerprintDomain):]
	field := func() (string, bool) {
		n, w := binary.Uvarint(in)
		if w <= 0 || n > uint64(len(in)-w) {
			return "", false
		}
		s := string(in[w : w+int(n)])
		in = in[w+int(n):]
		return s, true
	}
	count := func() (int, bool) {
		n, w := binary.Uvarint(in)
		if w <= 0 || n > uint64(len(in)) {
			return 0, false
		}
		in = in[w:]
		return int(n), true
	}
	var ok bool
	if r.principal, ok = field(); !ok {
		return r, errors.New("bad principal")
	}
	if r.operation, ok = field(); !ok {
		return r, errors.New("bad operation")
	}
	names, ok := count()
	if !ok {
		return r, errors.New("bad parameter count")
	}
	for range names {
		name, ok := field()
		values, ok2 := count()
		if !ok || !ok2 || values == 0 {
			return r, errors.New("bad parameter")
		}
		if r.params == nil {
			r.params = url.Values{}
		}
		for range values {
			v, ok := field()
			if !ok {
				return r, errors.New("bad value")
			}
			r.params[name] = append(r.params[name], v)
		}
	}
	if len(in) == 0 || (in[0] != bodyJSON && in[0] != bodyRaw) {
		return r, errors.New("bad body kind")
	}
	r.kind, r.body = in[0], string(in[1:])
	return r, nil
}

// checkFraming fails t unless r's hash input decodes back to r (with
// names that have no values left out, as Sum leaves them out).
func checkFraming(t testing.TB, r request) {
	t.Helper()
	got, err := decodeInput(hashInput(r))
	require.NoError(t, err)
	want := r
	want.params = nil
	for name, values := range r.params {
		if len(values) > 0 {
			if want.params == nil {
				want.params = url.Values{}
			}
			want.params[name] = values
		}
	}
	require.Equal(t, want, got)
}

func TestSumFramingDecodes(t *testing.T) {
	long := strings.Repeat("x", 127)
	longer := strings.Repeat("y", 128)
	huge := strings.Repeat("z", 20000)
	for _, r := range []request{
		{kind: bodyRaw},
		{principal: "a", operation: "b", kind: bodyJSON, body: `{"c":1}`},
		{principal: long, operation: longer, params: url.Values{huge: {long, "", longer}}, kind: bodyRaw, body: huge},
		{principal: "\x01a\x01b", operation: "", params: url.Values{"": {""}, "\x00": nil}, kind: bodyRaw},
		{principal: "\x80\x01", operation: string(appendField(nil, "op")), kind: bodyJSON, body: string(appendField(nil, "x"))},
		{params: url.Values{"b": {"1"}, "a": {"2", "3"}, "c": {}}, kind: bodyJSON, body: "null"},
	} {
		checkFraming(t, r)
	}
}

// Requests whose fields hold the encodings of other fields, or whose
// lengths cross a uvarint width (127/128 bytes), must not collide.
func TestSumFramingAdversarial(t *testing.T) {
	f := newFingerprinter(t)
	x127, x128 := strings.Repeat("x", 127), strings.Repeat("x", 128)
	inner := string(appendField(appendField(nil, "a"), "b")) // how ("a", "b") is framed
	reqs := []request{
		{principal: "a", operation: "b"},
		{principal: inner},
		{principal: string(appendField(nil, "a")), operation: "b"},
		{operation: inner},
		{principal: x127, operation: "x"},
		{principal: x128},
		{principal: x127 + "\x01x"},
		{principal: "a", operation: "b\x00", body: ""},
		{principal: "a", operation: "b", params: url.Values{"": {""}}},
		{principal: "a", operation: "b", body: "\x01\x00"},
		{principal: "a", operation: "b", body: "R"},
		{principal: "a", operation: "bR"},
		{principal: "a", operation: "b", params: url.Values{"a": {"b", "c"}}},
		{principal: "a", operation: "b", params: url.Values{"a": {"b"}, "c": {""}}},
		{principal: "a", operation: "b", params: url.Values{"a": {"b\x01c"}}},
		{principal: "a", operation: "b", params: url.Values{"a\x01b": {"c"}}},
		{principal: fingerprintDomain},
		{body: fingerprintDomain + "\x01a\x01b\x00R"},
	}
	seen := map[string]int{}
	for i, r := range reqs {
		checkFraming(t, request{principal: r.principal, operation: r.operation, params: r.params, kind: bodyRaw, body: r.body})
		sum := f.SumRaw(r.principal, r.operation, r.params, []byte(r.body))
		if j, ok := seen[sum]; ok {
			t.Fatalf("request %d collides with request %d: %+v", i, j, r)
		}
		seen[sum] = i
	}
}

func FuzzSumFraming(f *testing.F) {
	f.Add("alice", "POST /orders", "q", "1", "", []byte(`{"a":1}`))
	f.Add("\x80", "\x01", "", "", "x", []byte{})
	f.Fuzz(func(t *testing.T, principal, operation, name, value, value2 string, body []byte) {
		params := url.Values{name: {value, value2}, name + "\x00": {value2}}
		checkFraming(t, request{principal, operation, params, bodyRaw, string(body)})
		checkFraming(t, request{principal, operation, nil, bodyJSON, string(body)})
	})
}

func TestSumAllocatesOnlyItsResult(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops buffers at random under -race")
	}
	f := newFingerprinter(t, WithVolatile("items[].nonce"))
	body, params := benchBody(), url.Values{"b": {"1"}, "a": {"2", "3"}}
	f.Sum("p", "o", params, body) // warm the pool
	allocs := testing.AllocsPerRun(100, func() {
		f.Sum("p", "o", params, body)
		f.SumRaw("p", "o", params, body)
	})
	assert.LessOrEqual(t, allocs, 2.0, "one string per fingerprint")
}

// More parameter names than appendParams keeps on its stack still sort.
func TestSumManyParams(t *testing.T) {
	f := newFingerprinter(t)
	a, b := url.Values{}, url.Values{}
	names := strings.Split("j i h g f e d c b a", " ")
	for i, n := range names {
		a[n] = []string{n}
		b[names[len(names)-1-i]] = []string{names[len(names)-1-i]}
	}
	assert.Equal(t, f.Sum("p", "o", a, nil), f.Sum("p", "o", b, nil))
	b["a"] = []string{"z"}
	assert.NotEqual(t, f.Sum("p", "o", a, nil), f.Sum("p", "o", b, nil))
	checkFraming(t, request{params: a, kind: bodyRaw})
}
