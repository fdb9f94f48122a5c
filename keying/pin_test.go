package keying

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFormatsPinned pins keys and fingerprints as stores hold them: a
// change here invalidates every record written before it.
func TestFormatsPinned(t *testing.T) {
	assert.Equal(t, "http:abc-123", Key("http", "abc-123"))
	assert.Equal(t, "http:a%3Ab%20c%25%23%7B%7D:%:#DOPX4IPEkSXHihPhSDYkJ2_wYWIvsnYl:#7f0tlc-XXQjGjnNX7uEfSzfcydoU_UJv",
		Key("http", "a:b c%#{}", "", strings.Repeat("z", 49), "\x00x"))
	f, err := NewFingerprinter(WithVolatile("ts"))
	assert.NoError(t, err)
	assert.Equal(t, "DJQB3YR03EB4TiZGIUPgEQ",
		f.Sum("alice", "POST /orders /orders", url.Values{"b": {"2"}, "a": {"1", "0"}}, []byte(`{"z":1, "a":[1.0,"x"],"ts":5}`)))
	assert.Equal(t, "j7qq1RsAg2kXYo_wLb8LSQ", f.Sum("bob", "PUT /x", nil, []byte("raw bytes")))
	assert.Equal(t, "0CfjAf1zxbaMINnm-NbNjQ", f.SumRaw("bob", "PUT /x", nil, []byte(`{"a":1}`)))
}
