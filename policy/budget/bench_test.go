package budget_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/internal/fake"
	"github.com/idemkit/idemkit/store"
)

// BenchmarkBudget compares a budgeted store (other) to the bare store
// (base), detached (the default) and inline.
func BenchmarkBudget(b *testing.B) {
	for _, backend := range []string{"memstore", "redis"} {
		b.Run(backend, func(b *testing.B) {
			var s store.Store = newMem(b)
			if backend == "redis" {
				s = fake.BenchRedis(b)
			}
			fake.Fill(b, s)
			b.Run("detached", func(b *testing.B) { fake.Compare(b, s, mustBudget(b, s, time.Second)) })
			b.Run("inline", func(b *testing.B) { fake.Compare(b, s, mustBudget(b, s, time.Second, budget.WithInline())) })
		})
	}
}
