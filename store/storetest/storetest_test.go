package storetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// faults are the contract breaks refStore can be told to make, so that
// the tests can show the suite catches each one.
type faults struct {
	getThenSet     bool // SetNX (and each batch item) reads, then writes in a second step
	shareValues    bool // keeps the caller's slices and hands out its own
	ignoreTTL      bool // nothing ever expires
	acceptInvalid  bool // skips argument checks
	casKeepsTTL    bool // CompareAndSwap keeps the old TTL
	casComparesNew bool // CompareAndSwap compares the current value with new, not old
	consumeKeeps   bool // Consume returns the value without deleting it
	batchLastWins  bool // a key repeated in a batch takes its last value
	batchPartial   bool // a batch writes the items before an invalid one
	ignoreCtx      bool // reports plain errors for a done context
	batchUnordered bool // batch results come back in reverse order
	valueNoExpiry  bool // SetNXValue stores for an hour, whatever its TTL
	valueHidden    bool // SetNXValue of a present key returns no existing value
}

// refStore is the simplest correct Store and Batcher, one mutex around one
// map with wall-clock expiry, unless faults tell it to break a rule. With
// no faults it shows that the suite passes a store that follows the
// contract and makes no assumption beyond it.
type refStore struct {
	f  faults
	mu sync.Mutex
	m  map[string]refEntry
}

type refEntry struct {
	value   []byte
	expires time.Time
}

func newRefStore(f faults) *refStore {
	return &refStore{f: f, m: make(map[string]refEntry)}
}

// live returns key's entry if it has not expired. The caller holds mu.
func (r *refStore) live(key string) (refEntry, bool) {
	e, ok := r.m[key]
	if ok && !r.f.ignoreTTL && !time.Now().Before(e.expires) {
		delete(r.m, key)
		return refEntry{}, false
	}
	return e, ok
}

func (r *refStore) entry(e refEntry) store.Entry {
	ttl := store.RoundTTL(max(time.Until(e.expires), time.Nanosecond))
	return store.Entry{Value: r.copy(e.value), TTL: ttl}
}

func (r *refStore) copy(v []byte) []byte {
	if r.f.shareValues {
		return v
	}
	return slices.Clone(v)
}

// begin returns the error, if any, with which an operation fails before it
// starts.
func (r *refStore) begin(ctx context.Context, argErr error) error {
	if argErr != nil && !r.f.acceptInvalid {
		return argErr
	}
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case r.f.ignoreCtx:
		return errors.New("ref: context done")
	case errors.Is(err, context.DeadlineExceeded):
		return store.Unavailable("ref", err)
	default:
		return fmt.Errorf("ref: %w", err)
	}
}

// put stores value under key. The caller holds mu.
func (r *refStore) put(key string, value []byte, ttl time.Duration) {
	r.m[key] = refEntry{r.copy(value), time.Now().Add(store.RoundTTL(ttl))}
}

// setNX is SetNX in one step. The caller holds mu.
func (r *refStore) setNX(key string, value []byte, ttl time.Duration) (bool, store.Entry) {
	if e, ok := r.live(key); ok {
		return false, r.entry(e)
	}
	r.put(key, value, ttl)
	return true, store.Entry{}
}

// setNXInTwoSteps is the fault getThenSet: a read, then a write in
// another critical section. The yield stands for a remote store's round
// trip between its GET and its SET.
func (r *refStore) setNXInTwoSteps(key string, value []byte, ttl time.Duration) (bool, store.Entry) {
	r.mu.Lock()
	e, ok := r.live(key)
	r.mu.Unlock()
	if ok {
		return false, r.entry(e)
	}
	runtime.Gosched()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.put(key, value, ttl)
	return true, store.Entry{}
}

func (r *refStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := r.begin(ctx, store.CheckSet(key, value, ttl)); err != nil {
		return false, store.Entry{}, err
	}
	if r.f.getThenSet {
		set, e := r.setNXInTwoSteps(key, value, ttl)
		return set, e, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	set, e := r.setNX(key, value, ttl)
	return set, e, nil
}

// SetNXBatch claims every item in one critical section.
func (r *refStore) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	if err := r.begin(ctx, store.CheckBatch(items)); err != nil && !r.f.batchPartial {
		return nil, err
	}
	res := make([]store.BatchResult, len(items))
	if r.f.getThenSet {
		for i, it := range items {
			res[i].Set, res[i].Existing = r.setNXInTwoSteps(it.Key, it.Value, it.TTL)
		}
		return res, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for i, it := range items {
		if err := store.CheckSet(it.Key, it.Value, it.TTL); err != nil {
			return nil, err // reached only with the fault batchPartial
		}
		if r.f.batchLastWins && seen[it.Key] {
			r.put(it.Key, it.Value, it.TTL)
			res[i].Set = true
			continue
		}
		seen[it.Key] = true
		res[i].Set, res[i].Existing = r.setNX(it.Key, it.Value, it.TTL)
	}
	if r.f.batchUnordered {
		slices.Reverse(res)
	}
	return res, nil
}

func (r *refStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := r.begin(ctx, store.CheckKey(key)); err != nil {
		return store.Entry{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.live(key); ok {
		return r.entry(e), nil
	}
	return store.Entry{}, store.ErrNotFound
}

func (r *refStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := r.begin(ctx, store.CheckSwap(key, old, new, ttl)); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.live(key)
	want := old
	if r.f.casComparesNew {
		want = new
	}
	if !ok || !bytes.Equal(e.value, want) {
		return false, nil
	}
	r.put(key, new, ttl)
	if r.f.casKeepsTTL {
		r.m[key] = refEntry{r.m[key].value, e.expires}
	}
	return true, nil
}

func (r *refStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := r.begin(ctx, store.CheckDelete(key, old)); err != nil {
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
	if err := r.begin(ctx, store.CheckKey(key)); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.live(key)
	if !ok {
		return nil, store.ErrNotFound
	}
	if !r.f.consumeKeeps {
		delete(r.m, key)
	}
	return r.copy(e.value), nil
}

// SetNXValue is SetNX without the TTL, with SetNX's faults and its own.
func (r *refStore) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	if r.f.valueNoExpiry {
		ttl = time.Hour
	}
	set, e, err := r.SetNX(ctx, key, value, ttl)
	if r.f.valueHidden {
		e.Value = nil
	}
	return set, e.Value, err
}

var (
	_ store.Batcher     = (*refStore)(nil)
	_ store.SetNXValuer = (*refStore)(nil)
)

func TestRunPassesReferenceStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return newRefStore(faults{}) })
}

// closingStore counts its Close calls.
type closingStore struct {
	*refStore
	closed *int
}

func (s closingStore) Close() error { *s.closed++; return nil }

func TestCheckPassesReferenceStoreAndClosesEach(t *testing.T) {
	made, closed := 0, 0
	err := storetest.Check(t.Context(), func() (store.Store, error) {
		made++
		return closingStore{newRefStore(faults{}), &closed}, nil
	})
	if err != nil {
		t.Errorf("Check of the reference store:\n%v", err)
	}
	if made == 0 || closed != made {
		t.Errorf("Check made %d stores and closed %d, want every one closed", made, closed)
	}
}

func BenchmarkReferenceStore(b *testing.B) {
	storetest.Bench(b, func(*testing.B) store.Store { return newRefStore(faults{}) })
}

func TestUnavailableFailsEveryOperation(t *testing.T) {
	s := storetest.Unavailable()
	ctx := context.Background()
	_, _, err1 := s.SetNX(ctx, "k", []byte("v"), time.Second)
	_, err2 := s.Get(ctx, "k")
	_, err3 := s.CompareAndSwap(ctx, "k", []byte("v"), []byte("w"), time.Second)
	_, err4 := s.CompareAndDelete(ctx, "k", []byte("v"))
	_, err5 := s.Consume(ctx, "k")
	for i, err := range []error{err1, err2, err3, err4, err5} {
		if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, storetest.ErrDown) {
			t.Errorf("operation %d: error %v, want one wrapping store.ErrUnavailable and storetest.ErrDown", i, err)
		}
	}
}
