package keying

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckClientKey(t *testing.T) {
	tok, err := NewToken()
	require.NoError(t, err)
	for _, k := range []string{"k", " ", "~", tok, "3f1c0a9e-77aa-4b1e-9d2c-0c5e1e2f3a4b", strings.Repeat("k", MaxKeyLen)} {
		assert.NoError(t, CheckClientKey(k), "key %q", k)
	}
	secret := "s3cret"
	for _, k := range []string{"", strings.Repeat("k", MaxKeyLen+1), secret + "\x00", secret + "\x7f", secret + "é", "\n" + secret} {
		err := CheckClientKey(k)
		require.ErrorIs(t, err, ErrMalformedKey, "key %q", k)
		assert.NotContains(t, err.Error(), secret, "the error never quotes the key")
	}
}

// A key of MaxKeyLen bytes still makes a bounded store key.
func TestMaxKeyLenFitsAKey(t *testing.T) {
	k := Key("http", Hidden("principal"), strings.Repeat("%", MaxKeyLen))
	assert.LessOrEqual(t, len(k), 4+1+digestPartLen+1+digestPartLen)
}

// TestClientKeyErrorTexts pins the texts of the errors for a malformed
// client key, which the adapters send back (idemhttp and idemfiber those
// of ParseKeyHeader, idemgrpc those of CheckClientKey): one sentinel,
// ErrMalformedKey, stands behind both, and neither quotes the key.
func TestClientKeyErrorTexts(t *testing.T) {
	checked := map[string]string{
		"":                       "keying: bad idempotency key: empty",
		strings.Repeat("k", 256): "keying: bad idempotency key: 256 bytes, at most 255",
		"s3cret\x00":             "keying: bad idempotency key: byte 6 is not printable ASCII",
		"s3cr\u00e9t":            "keying: bad idempotency key: byte 4 is not printable ASCII",
	}
	for key, want := range checked {
		err := CheckClientKey(key)
		require.ErrorIs(t, err, ErrMalformedKey, "key %q", key)
		assert.Equal(t, want, err.Error(), "key %q", key)
	}
	parsed := map[string]string{
		"":                       "malformed value: empty",
		`""`:                     "malformed value: empty",
		strings.Repeat("k", 256): "malformed value: 256 characters, at most 255",
		`"s3cret`:                "malformed value: unterminated string",
		`"s3\cret"`:              "malformed value: invalid escape",
		`"s3"cret"`:              "malformed value: unescaped quote inside the string",
		"\"s3cr\u00e9t\"":        "malformed value: non-printable character",
		"s3cret,x":               "malformed value: ',' is not allowed outside a quoted string",
		"s3cret\x01":             "malformed value: non-printable character",
	}
	for value, want := range parsed {
		_, err := parseBoth(t, value)
		require.ErrorIs(t, err, ErrMalformedKey, "value %q", value)
		assert.Equal(t, want, err.Error(), "value %q", value)
	}
}
