package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// ErrClosed is returned, wrapped together with store.ErrUnavailable, by
// every operation on a Store after Close.
var ErrClosed = errors.New("memstore: store is closed")

// ErrTooLarge is returned, wrapped, by a write whose entry alone exceeds a
// shard's byte budget (WithMaxBytes over the shard count). It wraps
// store.ErrInvalid: the write changed nothing.
var ErrTooLarge = fmt.Errorf("memstore: entry exceeds a shard's byte budget: %w", store.ErrInvalid)

// ErrFull is returned, wrapped together with store.ErrUnavailable, by a
// write that needs room the Store could make only by evicting a claim in
// progress (see the package doc's "Eviction" section). The write changed
// nothing; a retry succeeds once a claim ends or expires. Store.Refusals
// counts these refusals and WithOnFull reports each one.
var ErrFull = errors.New("memstore: store full")

// The refusals insert and rewrite return, before the Store wraps them.
var (
	errFull      = fmt.Errorf("%w: making room would evict a claim in progress", ErrFull)
	errScopeFull = fmt.Errorf("%w: the key's scope holds its quota in claims in progress", ErrFull)
)

// errTooLarge returns the error of a write of an entry of cost bytes to a
// shard whose budget is budget bytes.
func errTooLarge(cost, budget int64) error {
	return fmt.Errorf("%w (%d bytes, budget %d)", ErrTooLarge, cost, budget)
}

// Store is a bounded in-memory store.Store. Create one with New; the zero
// value is not usable. All methods are safe for concurrent use.
type Store struct {
	shards    []shard
	seed      maphash.Seed
	epoch     time.Time // monotonic origin of entry expiry times
	scopeOf   func(key string) string
	byScope   bool // a scope's keys share a shard (WithScopeQuota)
	onEvict   func(key string)
	onFull    func(key string)
	evictions atomic.Uint64
	refusals  atomic.Uint64
	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{} // closed by Close to stop the janitor
	janitor   sync.WaitGroup
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Closer = (*Store)(nil)
)

// New returns an empty Store configured by opts, or an error wrapping
// store.ErrInvalid if an option is invalid or the options do not fit
// together. If WithSweepInterval starts a janitor, call Close to stop it.
func New(opts ...Option) (*Store, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{
		shards:  make([]shard, c.shards),
		seed:    maphash.MakeSeed(),
		epoch:   time.Now(),
		scopeOf: c.scopeOf,
		byScope: c.quota > 0,
		onEvict: c.onEvict,
		onFull:  c.onFull,
		stop:    make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].init(shareOf(c.capacity, c.shards, i), shareOf(c.maxBytes, c.shards, i), c.quota)
	}
	if c.sweepInterval > 0 {
		s.janitor.Add(1)
		go s.runJanitor(c.sweepInterval)
	}
	return s, nil
}

// SetNX implements store.Store. A new entry may evict others (see the
// package doc); one larger than a shard's byte budget fails with
// ErrTooLarge, and one that finds no room but claims in progress with
// ErrFull.
func (s *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if err := s.begin(ctx, "SetNX", store.CheckSet(key, value, ttl)); err != nil {
		return false, store.Entry{}, err
	}
	sh, scopeName := s.shardOf(key, true)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return false, store.Entry{}, errClosed("SetNX")
	}
	now := s.now()
	if n := sh.get(key, now); n != nil {
		v, ttl := n.value, n.remaining(now)
		sh.mu.Unlock()
		return false, store.Entry{Value: slices.Clone(v), TTL: ttl}, nil
	}
	evicted, err := sh.insert(key, scopeName, slices.Clone(value), expiry(now, ttl), now, nil)
	sh.mu.Unlock()
	s.evicted(evicted)
	if err != nil {
		return false, store.Entry{}, s.writeFailed("SetNX", key, err)
	}
	return true, store.Entry{}, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := s.begin(ctx, "Get", store.CheckKey(key)); err != nil {
		return store.Entry{}, err
	}
	sh, _ := s.shardOf(key, false)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return store.Entry{}, errClosed("Get")
	}
	now := s.now()
	n := sh.get(key, now)
	if n == nil {
		sh.mu.Unlock()
		return store.Entry{}, errGetNotFound
	}
	v, ttl := n.value, n.remaining(now)
	sh.mu.Unlock()
	return store.Entry{Value: slices.Clone(v), TTL: ttl}, nil
}

// The errors of a missing key, made once: a miss is a common answer (a
// step not yet recorded, a key released), not an exceptional one.
var (
	errGetNotFound     = fmt.Errorf("memstore: Get: %w", store.ErrNotFound)
	errConsumeNotFound = fmt.Errorf("memstore: Consume: %w", store.ErrNotFound)
)

// CompareAndSwap implements store.Store. The swapped entry moves to the
// protected segment, or stays with the claims in progress if new is one
// (see the package doc); a new value that alone exceeds a shard's byte
// budget fails with ErrTooLarge, and one that grows the entry past what
// evictions can free with ErrFull.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := s.begin(ctx, "CompareAndSwap", store.CheckSwap(key, old, new, ttl)); err != nil {
		return false, err
	}
	sh, _ := s.shardOf(key, false)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return false, errClosed("CompareAndSwap")
	}
	now := s.now()
	n := sh.get(key, now)
	if n == nil || !bytes.Equal(n.value, old) {
		sh.mu.Unlock()
		return false, nil
	}
	value := n.value
	if !bytes.Equal(value, new) {
		value = slices.Clone(new)
	}
	evicted, err := sh.rewrite(n, value, expiry(now, ttl), now, nil)
	sh.mu.Unlock()
	s.evicted(evicted)
	if err != nil {
		return false, s.writeFailed("CompareAndSwap", key, err)
	}
	return true, nil
}

// CompareAndDelete implements store.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := s.begin(ctx, "CompareAndDelete", store.CheckDelete(key, old)); err != nil {
		return false, err
	}
	sh, _ := s.shardOf(key, false)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return false, errClosed("CompareAndDelete")
	}
	n := sh.peek(key, s.now())
	if n == nil || !bytes.Equal(n.value, old) {
		return false, nil
	}
	sh.drop(n)
	return true, nil
}

// Consume implements store.Store.
func (s *Store) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := s.begin(ctx, "Consume", store.CheckKey(key)); err != nil {
		return nil, err
	}
	sh, _ := s.shardOf(key, false)
	sh.mu.Lock()
	if s.closed.Load() {
		sh.mu.Unlock()
		return nil, errClosed("Consume")
	}
	n := sh.peek(key, s.now())
	if n == nil {
		sh.mu.Unlock()
		return nil, errConsumeNotFound
	}
	sh.drop(n)
	v := n.value
	sh.mu.Unlock()
	// A concurrent Get may still be copying v, so the caller gets a copy
	// it is free to modify.
	return slices.Clone(v), nil
}

// Evictions returns how many live (unexpired) entries the Store has
// evicted to make room since it was created. Expired entries reclaimed and
// entries deleted by CompareAndDelete or Consume do not count.
func (s *Store) Evictions() uint64 {
	return s.evictions.Load()
}

// Refusals returns how many writes the Store has refused with ErrFull
// since it was created: writes that needed room it could make only by
// evicting a claim in progress.
func (s *Store) Refusals() uint64 {
	return s.refusals.Load()
}

// Len returns the number of entries the Store holds, including expired
// entries not yet reclaimed. Under concurrent writes it is approximate.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		entries, _ := s.shards[i].size()
		n += entries
	}
	return n
}

// Bytes returns the bytes the Store counts against WithMaxBytes (see the
// package doc's "Bounds" section). Under concurrent writes it is
// approximate, but never above the budget.
func (s *Store) Bytes() int64 {
	var n int64
	for i := range s.shards {
		_, b := s.shards[i].size()
		n += b
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

// shardOf returns the shard that holds key and, if withScope or the
// Store places keys by scope, key's scope: with a scope quota, every key
// of a scope lives in the scope's shard, so that the quota is kept under
// that shard's lock alone.
func (s *Store) shardOf(key string, withScope bool) (*shard, string) {
	i, name := s.shardIndex(key, withScope)
	return &s.shards[i], name
}

// shardIndex returns the index of the shard that holds key and, if
// withScope or the Store places keys by scope, key's scope.
func (s *Store) shardIndex(key string, withScope bool) (int, string) {
	var name string
	if withScope || s.byScope {
		name = s.scopeOf(key)
	}
	h := maphash.String(s.seed, key)
	if s.byScope && name != "" {
		h = maphash.String(s.seed, name)
	}
	// Lemire's multiply-shift maps h onto [0, len) without a division.
	i, _ := bits.Mul64(h, uint64(len(s.shards)))
	return int(i), name
}

// now returns the monotonic time since the Store's epoch, in nanoseconds.
func (s *Store) now() int64 {
	return int64(time.Since(s.epoch))
}

// evicted counts and reports the eviction of live entries. The caller
// holds no lock.
func (s *Store) evicted(keys []string) {
	if len(keys) == 0 {
		return
	}
	s.evictions.Add(uint64(len(keys)))
	if s.onEvict != nil {
		for _, k := range keys {
			s.reportEviction(k)
		}
	}
}

// writeFailed returns the error of op's write of key that insert or
// rewrite refused, counting and reporting a refusal for want of room.
func (s *Store) writeFailed(op, key string, err error) error {
	if !errors.Is(err, ErrFull) {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.refusals.Add(1)
	if s.onFull != nil {
		s.report(s.onFull, key)
	}
	return store.Unavailable("memstore: "+op, err)
}

// reportEviction calls the eviction callback with key. A panicking
// callback is recovered: the write that evicted has taken effect, and a
// caller that never learns so (an engine claim) would leave its key held.
func (s *Store) reportEviction(key string) {
	s.report(s.onEvict, key)
}

// report calls fn with key, recovering a panic.
func (s *Store) report(fn func(key string), key string) {
	defer func() { _ = recover() }()
	fn(key)
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
