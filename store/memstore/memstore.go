package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// ErrClosed is returned, wrapped together with store.ErrUnavailable, by
// every operation on a Store after Close.
var ErrClosed = errors.New("memstore: store is closed")

// Store is a bounded in-memory store.Store. Create one with New; the zero
// value is not usable. All methods are safe for concurrent use.
type Store struct {
	shards    []shard
	mask      uint64
	seed      maphash.Seed
	epoch     time.Time // monotonic origin of entry expiry times
	onEvict   func(key string)
	evictions atomic.Uint64
	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{} // closed by Close to stop the janitor
	janitor   sync.WaitGroup
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Closer = (*Store)(nil)
)

// New returns an empty Store configured by opts. It never fails: options
// out of range are clamped as each Option documents. If WithSweepInterval
// starts a janitor, call Close to stop it.
func New(opts ...Option) *Store {
	c := newConfig(opts)
	s := &Store{
		shards:  make([]shard, c.shards),
		mask:    uint64(c.shards - 1),
		seed:    maphash.MakeSeed(),
		epoch:   time.Now(),
		onEvict: c.onEvict,
		stop:    make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].init(shareOf(c.capacity, c.shards, i))
	}
	if c.sweepInterval > 0 {
		s.janitor.Add(1)
		go s.runJanitor(c.sweepInterval)
	}
	return s
}

// shareOf returns shard i's share of capacity split evenly over n shards.
func shareOf(capacity, n, i int) int {
	share := capacity / n
	if i < capacity%n {
		share++
	}
	return share
}

// SetNX implements store.Store.
func (s *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := s.begin(ctx, "SetNX", store.CheckSet(key, value, ttl)); err != nil {
		return false, store.Entry{}, err
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return false, store.Entry{}, errClosed("SetNX")
	}
	now := s.now()
	if e, ok := sh.get(key, now); ok {
		sh.mu.Unlock()
		return false, store.Entry{Value: slices.Clone(e.value), TTL: e.remaining(now)}, nil
	}
	evicted, didEvict := sh.insert(key, entry{value: slices.Clone(value), expires: expiry(now, ttl)}, now)
	sh.mu.Unlock()
	if didEvict {
		s.evicted(evicted)
	}
	return true, store.Entry{}, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := s.begin(ctx, "Get", store.CheckKey(key)); err != nil {
		return store.Entry{}, err
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return store.Entry{}, errClosed("Get")
	}
	now := s.now()
	e, ok := sh.get(key, now)
	sh.mu.Unlock()
	if !ok {
		return store.Entry{}, fmt.Errorf("memstore: Get: %w", store.ErrNotFound)
	}
	return store.Entry{Value: slices.Clone(e.value), TTL: e.remaining(now)}, nil
}

// CompareAndSwap implements store.Store.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := s.begin(ctx, "CompareAndSwap", store.CheckSwap(key, old, new, ttl)); err != nil {
		return false, err
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return false, errClosed("CompareAndSwap")
	}
	now := s.now()
	e, ok := sh.get(key, now)
	if !ok || !bytes.Equal(e.value, old) {
		return false, nil
	}
	if !bytes.Equal(e.value, new) {
		e.value = slices.Clone(new)
	}
	e.expires = expiry(now, ttl)
	sh.lru.Add(key, e)
	return true, nil
}

// CompareAndDelete implements store.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := s.begin(ctx, "CompareAndDelete", store.CheckDelete(key, old)); err != nil {
		return false, err
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return false, errClosed("CompareAndDelete")
	}
	e, ok := sh.peek(key, s.now())
	if !ok || !bytes.Equal(e.value, old) {
		return false, nil
	}
	sh.lru.Remove(key)
	return true, nil
}

// Consume implements store.Store.
func (s *Store) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := s.begin(ctx, "Consume", store.CheckKey(key)); err != nil {
		return nil, err
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return nil, errClosed("Consume")
	}
	e, ok := sh.peek(key, s.now())
	if ok {
		sh.lru.Remove(key)
	}
	sh.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("memstore: Consume: %w", store.ErrNotFound)
	}
	// A concurrent Get may still be copying e.value, so the caller gets a
	// copy it is free to modify.
	return slices.Clone(e.value), nil
}

// Evictions returns how many live (unexpired) entries the Store has pushed
// out to make room for new keys since it was created. Expired entries
// reclaimed and entries deleted by CompareAndDelete or Consume do not
// count.
func (s *Store) Evictions() uint64 {
	return s.evictions.Load()
}

// Len returns the number of entries the Store holds, including expired
// entries not yet reclaimed. It locks each shard in turn, so under
// concurrent writes the result is approximate.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		n += s.shards[i].len()
	}
	return n
}

// Close stops the janitor, if any, waits for it to exit, and drops every
// entry. Afterwards every operation fails with an error wrapping both
// ErrClosed and store.ErrUnavailable. Close is idempotent and always
// returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		s.janitor.Wait()
		for i := range s.shards {
			s.shards[i].purge()
		}
	})
	return nil
}

// begin returns the error, if any, that stops an operation before it
// touches the store: invalid arguments (argErr), or ctx being done.
func (s *Store) begin(ctx context.Context, op string, argErr error) error {
	if argErr != nil {
		return fmt.Errorf("memstore: %s: %w", op, argErr)
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return store.Unavailable("memstore: "+op, err)
		}
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	return nil
}

// errClosed returns the error of op on a closed Store.
func errClosed(op string) error {
	return store.Unavailable("memstore: "+op, ErrClosed)
}

// shardFor returns the shard that holds key.
func (s *Store) shardFor(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
}

// now returns the monotonic time since the Store's epoch, in nanoseconds.
func (s *Store) now() int64 {
	return int64(time.Since(s.epoch))
}

// evicted records the eviction of a live entry and reports it.
func (s *Store) evicted(key string) {
	s.evictions.Add(1)
	if s.onEvict != nil {
		s.onEvict(key)
	}
}

// expiry returns the expiry time of an entry stored at now with ttl (> 0),
// rounded up to a whole millisecond; a TTL too long to represent never
// expires.
func expiry(now int64, ttl time.Duration) int64 {
	if ttl > math.MaxInt64-time.Millisecond-time.Duration(now) {
		return math.MaxInt64
	}
	return now + int64(store.RoundTTL(ttl))
}
