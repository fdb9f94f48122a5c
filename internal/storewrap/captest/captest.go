// Package captest checks a store wrapper against the rule of package
// storewrap, over stores with every set of optional interfaces.
package captest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// Rule is what a wrapper promises for an inner store with the optional
// interfaces inner: the interfaces it offers, and those of them whose
// calls reach the inner store's method of the same name.
type Rule struct {
	Offers   func(inner storewrap.Caps) storewrap.Caps
	Forwards func(inner storewrap.Caps) storewrap.Caps
}

// Exactly is the rule of a wrapper that offers and forwards exactly the
// interfaces of the store it wraps.
var Exactly = Rule{
	Offers:   func(c storewrap.Caps) storewrap.Caps { return c },
	Forwards: func(c storewrap.Caps) storewrap.Caps { return c },
}

// inner is a memstore with exactly the optional interfaces of its set,
// counting the calls to each.
type inner struct {
	mem   *memstore.Store
	calls [5]atomic.Int64
}

func (in *inner) count(c storewrap.Caps) int64 {
	for i := range in.calls {
		if c == 1<<i {
			return in.calls[i].Load()
		}
	}
	panic("one capability at a time")
}

// Check runs wrap over a store with each set of optional interfaces and
// fails t where the result offers, or forwards, other than rule says.
func Check(t *testing.T, wrap func(t *testing.T, s store.Store) store.Store, rule Rule) {
	ctx := context.Background()
	for set := storewrap.Caps(0); set <= storewrap.All; set++ {
		mem, err := memstore.New()
		if err != nil {
			t.Fatal(err)
		}
		in := &inner{mem: mem}
		s := storewrap.Build(struct{ store.Store }{mem}, set, storewrap.Methods{
			Close: func() error { in.calls[0].Add(1); return mem.Close() },
			Ping:  func(context.Context) error { in.calls[1].Add(1); return nil },
			SetNXValue: func(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
				in.calls[2].Add(1)
				set, e, err := mem.SetNX(ctx, key, value, ttl)
				return set, e.Value, err
			},
			SetNXBatch: func(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
				in.calls[3].Add(1)
				return mem.SetNXBatch(ctx, items)
			},
			Scan: func(ctx context.Context, prefix string, fn func(string, store.Entry) bool) error {
				in.calls[4].Add(1)
				return mem.Scan(ctx, prefix, fn)
			},
		})
		w := wrap(t, s)
		got, want := storewrap.Of(w), rule.Offers(set)
		if got != want {
			t.Errorf("over a store with %v: the wrapper offers %v, want %v", set, got, want)
			_ = mem.Close()
			continue
		}
		forwards := rule.Forwards(set)
		check := func(c storewrap.Caps, call func() error) {
			if got&c == 0 {
				return
			}
			before := int64(0)
			if set&c != 0 {
				before = in.count(c)
			}
			if err := call(); err != nil {
				t.Errorf("over a store with %v: %v: %v", set, c, err)
			}
			reached := set&c != 0 && in.count(c) > before
			if reached != (forwards&c != 0) {
				t.Errorf("over a store with %v: %v reached the wrapped store's: %v, want %v", set, c, reached, forwards&c != 0)
			}
		}
		check(storewrap.Pinger, func() error { return w.(store.Pinger).Ping(ctx) })
		check(storewrap.Valuer, func() error {
			_, _, err := w.(store.SetNXValuer).SetNXValue(ctx, "v", []byte("1"), time.Minute)
			return err
		})
		check(storewrap.Batcher, func() error {
			_, err := w.(store.Batcher).SetNXBatch(ctx, []store.BatchItem{{Key: "b", Value: []byte("1"), TTL: time.Minute}})
			return err
		})
		check(storewrap.Scanner, func() error {
			return w.(store.Scanner).Scan(ctx, "", func(string, store.Entry) bool { return true })
		})
		check(storewrap.Closer, func() error { return w.(store.Closer).Close() })
		_ = mem.Close()
	}
}
