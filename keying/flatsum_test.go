package keying

import (
	"crypto/sha256"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/canonjson"
	"github.com/idemkit/idemkit/internal/canonjson/canonjsontest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAppendSumFlatMatchesReference: the fingerprint of a body, flat or
// not, is the digest of the framed fields and the reference's canonical
// form of the body (or the raw body when the reference rejects it),
// whatever the length of the fields, so also when they do not fit the
// buffer on the stack. The reference canonicalizer is canonjson's frozen
// one (internal/canonjson/reference_test.go): TestFlatObjectFastPath
// there checks that canonjson.Canonicalize, which this test calls, agrees
// with it on these very bodies, with and without these volatile paths.
func TestAppendSumFlatMatchesReference(t *testing.T) {
	long := strings.Repeat("o", flatSumBuffer)
	for _, volatile := range [][]string{nil, canonjsontest.Volatile} {
		f := newFingerprinter(t, WithVolatile(volatile...))
		for _, body := range append(slices.Clone(canonjsontest.FlatHits), canonjsontest.FlatNearMisses...) {
			for _, fields := range [][2]string{{"", "POST /orders"}, {"alice", "POST /v1/orders"}, {"", long}, {long[:flatSumBuffer-len(body)-flatSumFraming], ""}} {
				for _, params := range []url.Values{nil, {"q": {"1"}}} {
					r := request{principal: fields[0], operation: fields[1], params: params, kind: bodyJSON}
					if canonical, err := canonjson.Canonicalize([]byte(body), volatile); err == nil {
						r.body = string(canonical)
					} else {
						r.kind, r.body = bodyRaw, body
					}
					want := string(appendSumText(nil, sha256.Sum256(hashInput(r))))
					got := f.AppendSum([]byte("x"), fields[0], fields[1], params, []byte(body))
					require.Equal(t, "x"+want, string(got), "body %s fields %q params %v", body, fields, params)
				}
			}
		}
	}
}

// A flat body whose fields and body fill the buffer on the stack right up
// to the limit AppendSum checks is hashed without an allocation: the
// limit leaves room for the framing.
func TestAppendSumFlatAllocatesNothing(t *testing.T) {
	f := newFingerprinter(t)
	body := []byte(`{"sku":"book-42","qty":1}`)
	principal := strings.Repeat("p", 128) // a two-byte length
	operation := strings.Repeat("o", flatSumBuffer-flatSumFraming-len(body)-len(principal))
	dst := make([]byte, 0, SumLen)
	allocs := testing.AllocsPerRun(100, func() {
		f.AppendSum(dst, principal, operation, nil, body)
		f.AppendSum(dst, "", "POST /orders", nil, body)
	})
	assert.Zero(t, allocs)
}
