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
		require.ErrorIs(t, err, ErrBadClientKey, "key %q", k)
		assert.NotContains(t, err.Error(), secret, "the error never quotes the key")
	}
}

// A key of MaxKeyLen bytes still makes a bounded store key.
func TestMaxKeyLenFitsAKey(t *testing.T) {
	k := Key("http", Hidden("principal"), strings.Repeat("%", MaxKeyLen))
	assert.LessOrEqual(t, len(k), 4+1+digestPartLen+1+digestPartLen)
}
