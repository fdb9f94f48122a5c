package storewrap_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/internal/storewrap/captest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/nearcache"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
)

// Every store wrapper of the root module against the rule, over stores
// with each set of optional interfaces (the OpenTelemetry wrapper, in its
// own module, runs the same check in otel/wrapcaps_test.go).
func TestWrappersFollowTheRule(t *testing.T) {
	t.Run("Build", func(t *testing.T) {
		captest.Check(t, func(t *testing.T, s store.Store) store.Store {
			return storewrap.Build(s, storewrap.Of(s), storewrap.Methods{
				Close:      closeOf(s),
				Ping:       pingOf(s),
				SetNXValue: valueOf(s),
				SetNXBatch: batchOf(s),
				Scan:       scanOf(s),
			})
		}, captest.Exactly)
	})
	t.Run("budget", func(t *testing.T) {
		captest.Check(t, func(t *testing.T, s store.Store) store.Store {
			return must(t)(budget.New(s, time.Second))
		}, captest.Exactly)
	})
	t.Run("budget inline", func(t *testing.T) {
		captest.Check(t, func(t *testing.T, s store.Store) store.Store {
			return must(t)(budget.New(s, time.Second, budget.WithInline()))
		}, captest.Exactly)
	})
	// A near cache claims through SetNX on a miss (it needs the TTL), so
	// its SetNXValue does not reach the store's.
	t.Run("nearcache", func(t *testing.T) {
		captest.Check(t, func(t *testing.T, s store.Store) store.Store {
			return must(t)(nearcache.New(s, idemkit.Settled))
		}, captest.Rule{
			Offers:   func(c storewrap.Caps) storewrap.Caps { return c },
			Forwards: func(c storewrap.Caps) storewrap.Caps { return c &^ storewrap.Valuer },
		})
	})
	// A tiered store is its primary with a fallback for outages: it offers
	// its primary's interfaces, and always Close (it owns the goroutine
	// that copies keys forward), which closes the primary when it can.
	t.Run("tiered primary", func(t *testing.T) {
		captest.Check(t, func(t *testing.T, s store.Store) store.Store {
			return must(t)(tiered.New(s, testkit.NewMem(t), idemkit.Supersedes))
		}, captest.Rule{
			Offers:   func(c storewrap.Caps) storewrap.Caps { return c | storewrap.Closer },
			Forwards: func(c storewrap.Caps) storewrap.Caps { return c },
		})
	})
	t.Run("tiered fallback", func(t *testing.T) {
		captest.Check(t, func(t *testing.T, s store.Store) store.Store {
			return must(t)(tiered.New(struct{ store.Store }{testkit.NewMem(t)}, s, idemkit.Supersedes))
		}, captest.Rule{
			Offers:   func(storewrap.Caps) storewrap.Caps { return storewrap.Closer },
			Forwards: func(c storewrap.Caps) storewrap.Caps { return c & storewrap.Closer },
		})
	})
}

// The methods of s's optional interfaces, nil for those it lacks.
func closeOf(s store.Store) func() error {
	if c, ok := s.(store.Closer); ok {
		return c.Close
	}
	return nil
}

func pingOf(s store.Store) func(context.Context) error {
	if p, ok := s.(store.Pinger); ok {
		return p.Ping
	}
	return nil
}

func valueOf(s store.Store) func(context.Context, string, []byte, time.Duration) (bool, []byte, error) {
	if v, ok := s.(store.SetNXValuer); ok {
		return v.SetNXValue
	}
	return nil
}

func batchOf(s store.Store) func(context.Context, []store.BatchItem) ([]store.BatchResult, error) {
	if b, ok := s.(store.Batcher); ok {
		return b.SetNXBatch
	}
	return nil
}

func scanOf(s store.Store) func(context.Context, string, func(string, store.Entry) bool) error {
	if sc, ok := s.(store.Scanner); ok {
		return sc.Scan
	}
	return nil
}

// must returns a function that returns s, or fails t on err.
func must(t *testing.T) func(store.Store, error) store.Store {
	return func(s store.Store, err error) store.Store {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}
