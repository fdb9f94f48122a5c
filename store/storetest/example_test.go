package storetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// mapStore is a custom backend: one mutex around one map, each operation
// one critical section, values copied in and out, expiry checked on read
// (a real backend also reclaims expired entries). It implements the
// optional store.Batcher too, so the suite runs its batch cases.
type mapStore struct {
	mu sync.Mutex
	m  map[string]mapEntry
}

type mapEntry struct {
	value   []byte
	expires time.Time
}

// get returns key's live entry; the caller holds mu.
func (s *mapStore) get(key string) (store.Entry, bool) {
	e, ok := s.m[key]
	ttl := time.Until(e.expires)
	if !ok || ttl <= 0 {
		return store.Entry{}, false
	}
	return store.Entry{Value: slices.Clone(e.value), TTL: store.RoundTTL(ttl)}, true
}

// put stores a copy of value; the caller holds mu.
func (s *mapStore) put(key string, value []byte, ttl time.Duration) {
	s.m[key] = mapEntry{slices.Clone(value), time.Now().Add(store.RoundTTL(ttl))}
}

// ctxErr wraps a done ctx's error as the contract asks.
func ctxErr(ctx context.Context) error {
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return store.Unavailable("mapstore", err)
	default:
		return fmt.Errorf("mapstore: %w", err)
	}
}

func (s *mapStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	res, err := s.SetNXBatch(ctx, []store.BatchItem{{Key: key, Value: value, TTL: ttl}})
	if err != nil {
		return false, store.Entry{}, err
	}
	return res[0].Set, res[0].Existing, nil
}

func (s *mapStore) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := make([]store.BatchResult, len(items))
	for i, it := range items {
		if e, ok := s.get(it.Key); ok {
			res[i].Existing = e
			continue
		}
		s.put(it.Key, it.Value, it.TTL)
		res[i].Set = true
	}
	return res, nil
}

func (s *mapStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, err
	}
	if err := ctxErr(ctx); err != nil {
		return store.Entry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.get(key); ok {
		return e, nil
	}
	return store.Entry{}, store.ErrNotFound
}

func (s *mapStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := store.CheckSwap(key, old, new, ttl); err != nil {
		return false, err
	}
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.get(key); !ok || !bytes.Equal(e.Value, old) {
		return false, nil
	}
	s.put(key, new, ttl)
	return true, nil
}

func (s *mapStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := store.CheckDelete(key, old); err != nil {
		return false, err
	}
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.get(key); !ok || !bytes.Equal(e.Value, old) {
		return false, nil
	}
	delete(s.m, key)
	return true, nil
}

func (s *mapStore) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.get(key)
	if !ok {
		return nil, store.ErrNotFound
	}
	delete(s.m, key)
	return e.Value, nil
}

// A backend's own tests run the suite with Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			return &mapStore{m: map[string]mapEntry{}}
//		})
//	}
//
// Check runs the same cases outside go test, returning every broken rule.
func Example() {
	err := storetest.Check(context.Background(), func() (store.Store, error) {
		return &mapStore{m: map[string]mapEntry{}}, nil
	})
	fmt.Println("broken rules:", err)
	// Output: broken rules: <nil>
}
