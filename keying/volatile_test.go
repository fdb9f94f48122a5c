package keying

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 11 item 8: with no options, a Fingerprinter compares the whole
// payload, so a field whose name was once in the default volatile list
// still tells two requests apart, at the top level and nested.
func TestSumDefaultKeepsEveryField(t *testing.T) {
	f, err := NewFingerprinter()
	require.NoError(t, err)
	var zero Fingerprinter
	pairs := [][2]string{
		{`{"amount":100,"sign":"+"}`, `{"amount":100,"sign":"-"}`},
		{`{"order":{"amount":100,"sign":"+"}}`, `{"order":{"amount":100,"sign":"-"}}`},
		{`{"lines":[{"amount":100,"sign":"+"}]}`, `{"lines":[{"amount":100,"sign":"-"}]}`},
		{`{"a":1,"traceId":"t1"}`, `{"a":1,"traceId":"t2"}`},
		{`{"a":1,"timestamp":1}`, `{"a":1,"timestamp":2}`},
		{`{"a":{"nonce":1}}`, `{"a":{"nonce":2}}`},
		{`{"random":1}`, `{"random":2}`},
		{`{"a":1,"sign":"+"}`, `{"a":1}`},
	}
	for _, p := range pairs {
		assert.NotEqual(t, f.Sum("u", "op", nil, []byte(p[0])), f.Sum("u", "op", nil, []byte(p[1])), "%s vs %s", p[0], p[1])
		assert.NotEqual(t, zero.Sum("u", "op", nil, []byte(p[0])), zero.Sum("u", "op", nil, []byte(p[1])), "zero value: %s vs %s", p[0], p[1])
	}
}

// Issue 11 item 8: the window set drops its names at the top level only;
// the same name nested deeper is part of the payload.
func TestWindowVolatileIsTopLevel(t *testing.T) {
	f, err := NewFingerprinter(WithVolatile(WindowVolatile()...))
	require.NoError(t, err)
	assert.Equal(t, f.Sum("u", "op", nil, []byte(`{"amount":100,"sign":"+"}`)), f.Sum("u", "op", nil, []byte(`{"amount":100,"sign":"-"}`)))
	assert.NotEqual(t, f.Sum("u", "op", nil, []byte(`{"order":{"amount":100,"sign":"+"}}`)), f.Sum("u", "op", nil, []byte(`{"order":{"amount":100,"sign":"-"}}`)))
}

// formatPath writes steps back as a path, escaping what needs it.
func formatPath(steps []step) string {
	var b strings.Builder
	for i, s := range steps {
		if s.elem {
			b.WriteString("[]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		for j := 0; j < len(s.name); j++ {
			if strings.IndexByte(`.[]\`, s.name[j]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(s.name[j])
		}
	}
	return b.String()
}

func FuzzVolatilePath(f *testing.F) {
	for _, s := range []string{"a", "meta.nonce", "items[].ts", "[].x", `a\.b`, "a[]", "a..b", `\`, "[][].a.b[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		steps, err := parsePath(path)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidPath)
			return
		}
		require.NotEmpty(t, steps)
		require.False(t, steps[len(steps)-1].elem, "a path ends with a name")
		again, err := parsePath(formatPath(steps))
		require.NoError(t, err)
		require.Equal(t, steps, again)
	})
}
