package keying

import (
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
