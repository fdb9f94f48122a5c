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
	assert.Equal(t, "CVpA9N0jC847197MR_PSnQ",
		f.Sum("alice", "POST /orders /orders", url.Values{"b": {"2"}, "a": {"1", "0"}}, []byte(`{"z":1, "a":[1.0,"x"],"ts":5}`)))
	assert.Equal(t, "FjiIzGR1THuz5tG9qtbhUA", f.Sum("bob", "PUT /x", nil, []byte("raw bytes")))
	assert.Equal(t, "uMb7S4-cT2LWclQOAiv5pQ", f.SumRaw("bob", "PUT /x", nil, []byte(`{"a":1}`)))
}
