package tiered_test

import (
	"testing"

	"github.com/idemkit/idemkit/policy/internal/fake"
)

// BenchmarkTiered compares a Tiered with its breaker closed (other) to its
// bare primary (base), in one run; the target ratio is at most 1.05.
func BenchmarkTiered(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		primary := newMem(b)
		fake.Fill(b, primary)
		fake.Compare(b, primary, mustTiered(b, primary, newMem(b)))
		b.Run("bare/SetNX/parallel", func(b *testing.B) { fake.BenchParallel(b, primary) })
		b.Run("tiered/SetNX/parallel", func(b *testing.B) { fake.BenchParallel(b, mustTiered(b, primary, newMem(b))) })
	})
	b.Run("redis", func(b *testing.B) {
		primary := fake.BenchRedis(b)
		fake.Fill(b, primary)
		fake.Compare(b, primary, mustTiered(b, primary, newMem(b)))
	})
}
