package linear_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// doubleWin lets every third SetNX on a present key win: it overwrites
// the key and reports set, as a store whose claim is a GET then a SET.
type doubleWin struct {
	store.Store
	n atomic.Int64
}

func (s *doubleWin) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	set, ent, err := s.Store.SetNX(ctx, key, v, ttl)
	if err == nil && !set && s.n.Add(1)%3 == 0 {
		ok, err := s.Store.CompareAndSwap(ctx, key, ent.Value, v, ttl)
		if err == nil && !ok {
			// Another client changed the key meanwhile: answer what the
			// failed claim saw, a valid entry, not an empty one.
			return false, ent, nil
		}
		return ok, store.Entry{}, err
	}
	return set, ent, err
}

// lostWrite acknowledges every third CompareAndSwap that would change
// the value, without writing it.
type lostWrite struct {
	store.Store
	n atomic.Int64
}

func (s *lostWrite) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	ent, err := s.Store.Get(ctx, key)
	if err == nil && string(ent.Value) == string(old) && string(old) != string(v) && s.n.Add(1)%3 == 0 {
		return true, nil
	}
	return s.Store.CompareAndSwap(ctx, key, old, v, ttl)
}

// doubleConsume hands out every third consumed value without deleting it.
type doubleConsume struct {
	store.Store
	n atomic.Int64
}

func (s *doubleConsume) Consume(ctx context.Context, key string) ([]byte, error) {
	if s.n.Add(1)%3 == 0 {
		ent, err := s.Store.Get(ctx, key)
		return ent.Value, err
	}
	return s.Store.Consume(ctx, key)
}

// TestCheckerFindsBrokenStores runs the workload over stores broken on
// purpose; the checker must call each history it records illegal and
// write its visualization.
func TestCheckerFindsBrokenStores(t *testing.T) {
	for name, wrap := range map[string]func(store.Store) store.Store{
		"SetNX wins twice":      func(s store.Store) store.Store { return &doubleWin{Store: s} },
		"lost acknowledged CAS": func(s store.Store) store.Store { return &lostWrite{Store: s} },
		"Consume twice":         func(s store.Store) store.Store { return &doubleConsume{Store: s} },
	} {
		t.Run(name, func(t *testing.T) {
			base, err := memstore.New()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = base.Close() })
			// A history may miss the defect by chance (nobody read the
			// lost write before it was overwritten); five in a row do
			// not, in practice.
			var res porcupine.CheckResult
			var path string
			for h := 0; h < 5 && res != porcupine.Illegal; h++ {
				w := linear.Workload{Clients: 4, Keys: 3, Values: 4, MaxOps: 100, Duration: time.Second,
					OpTimeout: time.Second, Prefix: fmt.Sprintf("broken%d:", h), Seed: uint64(h)}
				ops, _, err := linear.Run(wrap(base), w)
				if err != nil {
					t.Fatal(err)
				}
				if res, path, err = linear.Check(ops, t.Name()); err != nil {
					t.Fatal(err)
				}
			}
			if res != porcupine.Illegal {
				t.Fatalf("checker says %v for five histories of a broken store, want Illegal", res)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
				t.Fatalf("visualization %q: %v", path, err)
			}
			t.Logf("found; visualization: %s", path)
			_ = os.RemoveAll(filepath.Dir(path))
		})
	}
}
