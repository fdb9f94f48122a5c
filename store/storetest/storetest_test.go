package storetest_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
	"github.com/stretchr/testify/assert"
)

// refStore is the simplest correct Store: one mutex around one map, with
// wall-clock expiry. It checks that the suite passes a store that follows
// the contract and makes no assumption beyond it.
type refStore struct {
	mu sync.Mutex
	m  map[string]refEntry
}

type refEntry struct {
	value   []byte
	expires time.Time
}

func newRefStore(testing.TB) store.Store {
	return &refStore{m: make(map[string]refEntry)}
}

// live returns key's entry if it has not expired. The caller holds mu.
func (r *refStore) live(key string) (refEntry, bool) {
	e, ok := r.m[key]
	if ok && !time.Now().Before(e.expires) {
		delete(r.m, key)
		return refEntry{}, false
	}
	return e, ok
}

func (e refEntry) entry() store.Entry {
	ttl := time.Until(e.expires)
	return store.Entry{Value: slices.Clone(e.value), TTL: store.RoundTTL(max(ttl, time.Nanosecond))}
}

func begin(ctx context.Context, argErr error) error {
	if argErr != nil {
		return argErr
	}
	if err := ctx.Err(); err != nil {
		if err == context.DeadlineExceeded {
			return store.Unavailable("ref", err)
		}
		return fmt.Errorf("ref: %w", err)
	}
	return nil
}

func (r *refStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := begin(ctx, store.CheckSet(key, value, ttl)); err != nil {
		return false, store.Entry{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.live(key); ok {
		return false, e.entry(), nil
	}
	r.m[key] = refEntry{slices.Clone(value), time.Now().Add(store.RoundTTL(ttl))}
	return true, store.Entry{}, nil
}

func (r *refStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := begin(ctx, store.CheckKey(key)); err != nil {
		return store.Entry{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.live(key); ok {
		return e.entry(), nil
	}
	return store.Entry{}, store.ErrNotFound
}

func (r *refStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := begin(ctx, store.CheckSwap(key, old, new, ttl)); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.live(key); !ok || !bytes.Equal(e.value, old) {
		return false, nil
	}
	r.m[key] = refEntry{slices.Clone(new), time.Now().Add(store.RoundTTL(ttl))}
	return true, nil
}

func (r *refStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := begin(ctx, store.CheckDelete(key, old)); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.live(key); !ok || !bytes.Equal(e.value, old) {
		return false, nil
	}
	delete(r.m, key)
	return true, nil
}

func (r *refStore) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := begin(ctx, store.CheckKey(key)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.live(key)
	if !ok {
		return nil, store.ErrNotFound
	}
	delete(r.m, key)
	return slices.Clone(e.value), nil
}

func TestRunPassesReferenceStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newRefStore(t) })
}

func BenchmarkReferenceStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return newRefStore(b) })
}

func TestUnavailableFailsEveryOperation(t *testing.T) {
	s := storetest.Unavailable()
	ctx := context.Background()
	_, _, err := s.SetNX(ctx, "k", []byte("v"), time.Second)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.ErrorIs(t, err, storetest.ErrDown)
	_, err = s.Get(ctx, "k")
	assert.ErrorIs(t, err, store.ErrUnavailable)
	_, err = s.CompareAndSwap(ctx, "k", []byte("v"), []byte("w"), time.Second)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	_, err = s.CompareAndDelete(ctx, "k", []byte("v"))
	assert.ErrorIs(t, err, store.ErrUnavailable)
	_, err = s.Consume(ctx, "k")
	assert.ErrorIs(t, err, store.ErrUnavailable)
}
