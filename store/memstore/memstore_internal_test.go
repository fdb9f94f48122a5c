package memstore

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestExpiryRoundsTTLUp pins the contract's rounding: a TTL that is not a
// whole number of milliseconds is rounded up, never down or dropped. The
// conformance suite cannot see a sub-millisecond difference through a
// real clock.
func TestExpiryRoundsTTLUp(t *testing.T) {
	const now = int64(5 * time.Second)
	for ttl, want := range map[time.Duration]time.Duration{
		time.Nanosecond:                  time.Millisecond,
		999 * time.Microsecond:           time.Millisecond,
		time.Millisecond:                 time.Millisecond,
		1500 * time.Microsecond:          2 * time.Millisecond,
		10*time.Second + time.Nanosecond: 10*time.Second + time.Millisecond,
	} {
		assert.Equal(t, now+int64(want), expiry(now, ttl), "ttl %v", ttl)
	}
	assert.Equal(t, int64(math.MaxInt64), expiry(now, math.MaxInt64))
}
