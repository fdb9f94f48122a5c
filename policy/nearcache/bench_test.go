package nearcache_test

import (
	"testing"

	"github.com/idemkit/idemkit/policy/internal/fake"
)

// BenchmarkNearCache compares a near-cache hit on a settled key (other)
// with a Redis round trip (base).
func BenchmarkNearCache(b *testing.B) {
	s := fake.BenchRedis(b)
	fake.Fill(b, s)
	nc := mustNear(b, s, settledS)
	fake.Fill(b, nc) // every key held and settled: now cached
	fake.Compare(b, s, nc)
}
