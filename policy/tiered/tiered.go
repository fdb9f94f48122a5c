package tiered

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/store"
)

// Bits of Tiered.flags. While all are clear, operations take the fast path:
// straight to the primary, no breaker bookkeeping.
const (
	flagNotClosed uint32 = 1 << iota // the breaker is open or half-open
	flagDirty                        // a primary failure since the last success
	flagJournal                      // the journal owes the primary something
)

// errExcluded stands, inside the breaker, for an error caused by the
// caller's own context: it counts neither as a success nor as a failure.
var errExcluded = errors.New("tiered: caller's context done")

// errNotInFallback is the cause of the ErrUnavailable a Tiered returns when
// the fallback cannot answer for a key it never received.
var errNotInFallback = errors.New("the primary is unavailable and the fallback never held the key")

// errDeleteDeferred is the cause of the ErrUnavailable a Tiered returns for
// a CompareAndDelete it could not confirm on the primary.
var errDeleteDeferred = errors.New("delete deferred until the primary answers")

// tieredStore is the store New returns, before storewrap gives it the
// optional interfaces its tiers have.
type tieredStore struct {
	primary, fallback store.Store
	supersedes        func(held, candidate []byte) bool
	cb                *gobreaker.CircuitBreaker[struct{}]
	flags             atomic.Uint32
	state             atomic.Int32
	journal           *journal
	locks             *keyLocks
	observer          func(Event)
	copyTimeout       time.Duration

	fallbackOps, primaryFailed, dropped      atomic.Uint64
	copied, superseded, conflicts, skipped   atomic.Uint64
	failed, deferredDeletes, replayedDeletes atomic.Uint64

	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	mu        sync.Mutex // guards closed and the start of the copier
	closed    bool
	copying   atomic.Bool
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store  = (*tieredStore)(nil)
	_ store.Closer = (*tieredStore)(nil)
	_ store.Pinger = (*tieredStore)(nil)

	_ store.SetNXValuer = (*tieredStore)(nil)
)

// New returns a store.Store over primary (typically Redis) and fallback
// (typically memstore), switched by a circuit breaker. While the breaker
// is closed, operations go to the primary only, and a primary failure is
// returned as it is (wrapping store.ErrUnavailable); once the breaker is
// open, operations go to the fallback. Keys written to the fallback are
// copied forward to the primary when it answers again. See the package
// documentation for what this guarantees. StatsOf reports its state and
// counters.
//
// supersedes tells copy-forward when the fallback's value for a key
// (candidate) is a later state of the value the primary holds (held): it
// then replaces it, where otherwise the primary's value wins. With the
// idemkit engine pass idemkit.Supersedes; for other values, a function
// that returns false.
//
// The store owns its primary and fallback: Close closes both. It is safe
// for concurrent use. A nil store or predicate, or an invalid option, is
// an error wrapping store.ErrInvalid that names every problem.
func New(primary, fallback store.Store, supersedes func(held, candidate []byte) bool, opts ...Option) (store.Store, error) {
	var errs []error
	if primary == nil {
		errs = append(errs, errors.New("nil primary"))
	}
	if fallback == nil {
		errs = append(errs, errors.New("nil fallback"))
	}
	if supersedes == nil {
		errs = append(errs, errors.New("nil supersedes predicate"))
	}
	c := defaultConfig()
	errs = append(errs, options.Collect(&c, opts)...)
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("tiered: %w", err)
	}
	t := &tieredStore{
		primary:     primary,
		fallback:    fallback,
		supersedes:  supersedes,
		observer:    c.observer,
		copyTimeout: c.copyTimeout,
	}
	t.journal = newJournal(c.journalSize, &t.flags)
	t.locks = newKeyLocks()
	t.ctx, t.cancel = context.WithCancel(context.Background())
	threshold := uint32(c.threshold)
	t.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:          "idemkit-tiered",
		MaxRequests:   1,
		Timeout:       c.coolDown,
		ReadyToTrip:   func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= threshold },
		IsExcluded:    func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: t.stateChanged,
	})
	return t.wrap(), nil
}

// StatsOf returns the breaker's state and the counters of s, a store New
// returned, and false for any other store (one New's result was wrapped
// in, among them).
func StatsOf(s store.Store) (Stats, bool) {
	t, ok := storewrap.Core(s).(*tieredStore)
	if !ok {
		return Stats{}, false
	}
	return t.Stats(), true
}

// stateChanged mirrors the breaker's state into t's atomics and reports it.
// It runs under the breaker's lock.
func (t *tieredStore) stateChanged(_ string, _, to gobreaker.State) {
	var kind EventKind
	switch to {
	case gobreaker.StateClosed:
		t.state.Store(int32(BreakerClosed))
		t.flags.And(^(flagNotClosed | flagDirty))
		kind = EventClosed
	case gobreaker.StateHalfOpen:
		t.state.Store(int32(BreakerHalfOpen))
		t.flags.Or(flagNotClosed)
		kind = EventHalfOpen
	default:
		t.state.Store(int32(BreakerOpen))
		t.flags.Or(flagNotClosed)
		kind = EventOpen
	}
	t.emit(Event{Kind: kind})
}

// emit reports ev to the observer. A panicking observer is recovered, as
// the engine recovers a panicking Observer: reporting runs inside store
// operations (a claim that tripped the breaker, a fallback write with the
// journal full) and on the background copier, and must never fail the one
// or kill the process from the other.
func (t *tieredStore) emit(ev Event) {
	if t.observer != nil {
		t.report(ev)
	}
}

func (t *tieredStore) report(ev Event) {
	defer func() { _ = recover() }()
	t.observer(ev)
}

// State returns the breaker's state as of the last operation (an open
// breaker whose cool-down has passed turns half-open at the next one).
func (t *tieredStore) State() BreakerState { return BreakerState(t.state.Load()) }

// Stats returns the Tiered's counters.
func (t *tieredStore) Stats() Stats {
	return Stats{
		State:           t.State(),
		FallbackOps:     t.fallbackOps.Load(),
		PrimaryFailed:   t.primaryFailed.Load(),
		Journal:         t.journal.len(),
		JournalDropped:  t.dropped.Load(),
		Copied:          t.copied.Load(),
		Superseded:      t.superseded.Load(),
		Conflicts:       t.conflicts.Load(),
		Skipped:         t.skipped.Load(),
		CopyFailed:      t.failed.Load(),
		DeferredDeletes: t.deferredDeletes.Load(),
		ReplayedDeletes: t.replayedDeletes.Load(),
	}
}

// failure reports whether err, returned by the primary, counts against it:
// it wraps ErrUnavailable and the caller's context is not what ended it.
func failure(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(err, store.ErrUnavailable)
}

// verdict is what the breaker is told about a primary call's error.
func verdict(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return errExcluded
	case errors.Is(err, store.ErrUnavailable):
		return err
	}
	return nil // the primary answered
}

// fast reports whether an operation may go straight to the primary.
func (t *tieredStore) fast() bool { return t.flags.Load() == 0 }

// recordFailure tells the breaker about a primary failure seen outside it
// (on the fast path, or by the copier).
func (t *tieredStore) recordFailure(err error) {
	t.flags.Or(flagDirty)
	_, _ = t.cb.Execute(func() (struct{}, error) { return struct{}{}, err })
}

// route is where an operation ended up.
type route int

const (
	// answered: the primary answered, or the caller's context ended.
	answered route = iota
	// unknown: the call reached the primary and failed with
	// ErrUnavailable; whether it took effect is unknown.
	unknown
	// diverted: the call never reached the primary (the breaker is open,
	// or the primary failed while the key was being copied forward to it);
	// the fallback answers it.
	diverted
)

// viaPrimary runs call on the primary through the breaker, first bringing
// key up to date there if it is journaled, and says where the operation
// ended up.
func (t *tieredStore) viaPrimary(ctx context.Context, key string, call func() error) (route, error) {
	var forwardErr, callErr error
	_, err := t.cb.Execute(func() (struct{}, error) {
		if forwardErr = t.forwardIfJournaled(ctx, key); forwardErr != nil {
			return struct{}{}, verdict(ctx, forwardErr)
		}
		callErr = call()
		return struct{}{}, verdict(ctx, callErr)
	})
	switch {
	case errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests):
		return diverted, nil
	case failure(ctx, forwardErr):
		t.flags.Or(flagDirty)
		return diverted, nil
	case forwardErr != nil:
		return answered, forwardErr
	case failure(ctx, callErr):
		t.flags.Or(flagDirty)
		return unknown, callErr
	}
	if ctx.Err() == nil {
		t.primaryAnswered()
	}
	return answered, callErr
}

// primaryAnswered clears the failure streak once the breaker is closed and
// starts bringing journaled keys forward.
func (t *tieredStore) primaryAnswered() {
	if t.State() != BreakerClosed {
		return
	}
	t.flags.And(^flagDirty)
	t.startCopier()
}

// tierOp is one store operation, as run by tier.
type tierOp[T any] struct {
	key string
	// call runs the operation on s.
	call func(s store.Store) (T, error)
	// lost, if set, runs when the primary failed the call: its outcome is
	// unknown.
	lost func()
	// settle, if set, turns the fallback's answer into the Tiered's; it
	// runs under the key's lock, so it never interleaves with a
	// copy-forward of the key.
	settle func(v T, err error) (T, error)
}

// lostOnFastPath checks the primary's answer to an operation on the fast
// path (breaker closed, nothing journaled, no recent failure), which
// avoids tier's closures. It reports whether the primary failed, so the
// outcome is unknown; the failure is recorded with the breaker.
func (t *tieredStore) lostOnFastPath(ctx context.Context, err error) bool {
	return err != nil && t.failedOnFastPath(ctx, err) // inlined: no call on success
}

func (t *tieredStore) failedOnFastPath(ctx context.Context, err error) bool {
	if !failure(ctx, err) {
		return false
	}
	t.recordFailure(err)
	t.primaryFailed.Add(1)
	return true
}

// tier runs op on the primary while the breaker lets it through, and on
// the fallback otherwise. A primary failure is returned: the operation may
// have taken effect there, so it is never applied to the fallback as well.
func tier[T any](ctx context.Context, t *tieredStore, op tierOp[T]) (T, error) {
	var v T
	r, err := t.viaPrimary(ctx, op.key, func() (err error) {
		v, err = op.call(t.primary)
		return err
	})
	switch r {
	case answered:
		return v, err
	case unknown:
		t.primaryFailed.Add(1)
		if op.lost != nil {
			op.lost()
		}
		return v, err
	}
	t.fallbackOps.Add(1)
	h, err := t.locks.lock(ctx, op.key)
	if err != nil {
		var zero T
		return zero, err
	}
	defer h.unlock()
	v, err = op.call(t.fallback)
	if op.settle != nil {
		return op.settle(v, err)
	}
	return v, err
}

// notInFallback is the error for an operation the fallback answered with
// "absent" for a key it never received: the primary may hold the key.
func notInFallback(op string) error {
	return store.Unavailable("tiered: "+op, errNotInFallback)
}

// journalWrite remembers a key the fallback stored, with its TTL.
func (t *tieredStore) journalWrite(key string, ttl time.Duration) {
	if !t.journal.add(key, time.Now().Add(ttl)) {
		t.dropped.Add(1)
		t.emit(Event{Kind: EventJournalFull, Key: key})
	}
}

// deferDelete remembers a CompareAndDelete the primary must still get.
func (t *tieredStore) deferDelete(key string, old []byte) {
	if !t.journal.deferDelete(key, old) {
		t.dropped.Add(1)
		t.emit(Event{Kind: EventJournalFull, Key: key})
		return
	}
	t.deferredDeletes.Add(1)
}

// SetNX implements store.Store.
func (t *tieredStore) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if t.fast() {
		set, e, err := t.primary.SetNX(ctx, key, value, ttl)
		t.lostOnFastPath(ctx, err)
		return set, e, err
	}
	r, err := tier(ctx, t, tierOp[setResult]{
		key: key,
		call: func(s store.Store) (setResult, error) {
			set, e, err := s.SetNX(ctx, key, value, ttl)
			return setResult{set, e}, err
		},
		settle: func(r setResult, err error) (setResult, error) {
			if r.set && err == nil {
				t.journalWrite(key, ttl)
			}
			return r, err
		},
	})
	return r.set, r.e, err
}

// SetNXValue implements store.SetNXValuer, offered when the primary is
// one: SetNX without the existing entry's TTL, routed as SetNX is. The
// primary answers with its SetNXValue (redisstore on Redis 7.0 and later,
// in one command); the fallback with its own when it has one and with its
// SetNX otherwise, whose TTL is then dropped.
func (t *tieredStore) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	if t.fast() {
		set, v, err := setNXValue(ctx, t.primary, key, value, ttl)
		t.lostOnFastPath(ctx, err)
		return set, v, err
	}
	r, err := tier(ctx, t, tierOp[valueResult]{
		key: key,
		call: func(s store.Store) (valueResult, error) {
			set, v, err := setNXValue(ctx, s, key, value, ttl)
			return valueResult{set, v}, err
		},
		settle: func(r valueResult, err error) (valueResult, error) {
			if r.set && err == nil {
				t.journalWrite(key, ttl)
			}
			return r, err
		},
	})
	return r.set, r.existing, err
}

// Get implements store.Store. While the breaker is open, a key the
// fallback never received is unavailable, not absent.
func (t *tieredStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if t.fast() {
		e, err := t.primary.Get(ctx, key)
		t.lostOnFastPath(ctx, err)
		return e, err
	}
	return tier(ctx, t, tierOp[store.Entry]{
		key:  key,
		call: func(s store.Store) (store.Entry, error) { return s.Get(ctx, key) },
		settle: func(e store.Entry, err error) (store.Entry, error) {
			if errors.Is(err, store.ErrNotFound) && !t.journal.holds(key) {
				return e, notInFallback("Get")
			}
			return e, err
		},
	})
}

// CompareAndSwap implements store.Store. While the breaker is open, a
// swap of a key the fallback never received is unavailable.
func (t *tieredStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if t.fast() {
		ok, err := t.primary.CompareAndSwap(ctx, key, old, new, ttl)
		t.lostOnFastPath(ctx, err)
		return ok, err
	}
	return tier(ctx, t, tierOp[bool]{
		key:  key,
		call: func(s store.Store) (bool, error) { return s.CompareAndSwap(ctx, key, old, new, ttl) },
		settle: func(ok bool, err error) (bool, error) {
			switch {
			case err != nil:
			case ok:
				t.replaced(key, old)
				t.journalWrite(key, ttl)
			case !t.journal.holds(key):
				return false, notInFallback("CompareAndSwap")
			}
			return ok, err
		},
	})
}

// replaced records that the fallback no longer holds old for key: a copy
// of old that reached the primary with its reply lost must go too, so the
// delete is replayed there before key is copied forward.
func (t *tieredStore) replaced(key string, old []byte) { t.deferDelete(key, old) }

// CompareAndDelete implements store.Store. A delete the primary did not
// confirm (it failed, or the breaker is open and the fallback did not hold
// old) returns an error wrapping store.ErrUnavailable and is replayed on
// the primary when it answers again, before anything else touches the key
// there.
func (t *tieredStore) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if t.fast() {
		ok, err := t.primary.CompareAndDelete(ctx, key, old)
		if t.lostOnFastPath(ctx, err) {
			t.deferDelete(key, old)
		}
		return ok, err
	}
	return tier(ctx, t, tierOp[bool]{
		key:  key,
		call: func(s store.Store) (bool, error) { return s.CompareAndDelete(ctx, key, old) },
		lost: func() { t.deferDelete(key, old) },
		settle: func(ok bool, err error) (bool, error) {
			if err != nil {
				return ok, err
			}
			t.replaced(key, old)
			if !ok {
				return false, store.Unavailable("tiered: CompareAndDelete", errDeleteDeferred)
			}
			return true, nil
		},
	})
}

// Consume implements store.Store. While the breaker is open, a key the
// fallback never received is unavailable, not absent.
func (t *tieredStore) Consume(ctx context.Context, key string) ([]byte, error) {
	if t.fast() {
		v, err := t.primary.Consume(ctx, key)
		t.lostOnFastPath(ctx, err)
		return v, err
	}
	return tier(ctx, t, tierOp[[]byte]{
		key:  key,
		call: func(s store.Store) ([]byte, error) { return s.Consume(ctx, key) },
		settle: func(v []byte, err error) ([]byte, error) {
			switch {
			case err == nil:
				t.replaced(key, v)
			case errors.Is(err, store.ErrNotFound) && !t.journal.holds(key):
				return v, notInFallback("Consume")
			}
			return v, err
		},
	})
}

// Ping reports whether the Tiered can serve: nil when the primary answers,
// or when it does not but the fallback does (State and Stats tell which).
// A store that is not a store.Pinger is taken to answer. When neither
// answers, the error wraps store.ErrUnavailable.
func (t *tieredStore) Ping(ctx context.Context) error {
	perr := ping(ctx, t.primary)
	if perr == nil {
		return nil
	}
	ferr := ping(ctx, t.fallback)
	if ferr == nil {
		return nil
	}
	return store.Unavailable("tiered: ping", errors.Join(perr, ferr))
}

func ping(ctx context.Context, s store.Store) error {
	if p, ok := s.(store.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Close stops the background copy-forward, waits for it to exit, and
// closes the primary and the fallback (each if it is a store.Closer). Keys
// still journaled are not copied forward. Only the first call does this;
// later calls return its result.
func (t *tieredStore) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		t.cancel()
		t.wg.Wait()
		t.closeErr = errors.Join(storewrap.CloseStore(t.primary), storewrap.CloseStore(t.fallback))
	})
	return t.closeErr
}

// callerDone is the error of a wait whose caller's context is done: it
// wraps ctx.Err(), and ErrUnavailable for a deadline.
func callerDone(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return store.Unavailable("tiered: "+op, err)
	}
	return fmt.Errorf("tiered: %s: %w", op, err)
}

type setResult struct {
	set bool
	e   store.Entry
}

type valueResult struct {
	set      bool
	existing []byte
}

// setNXValue runs s's SetNXValue when s is a store.SetNXValuer, and its
// SetNX otherwise.
func setNXValue(ctx context.Context, s store.Store, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	if sv, ok := s.(store.SetNXValuer); ok {
		return sv.SetNXValue(ctx, key, value, ttl)
	}
	set, e, err := s.SetNX(ctx, key, value, ttl)
	return set, e.Value, err
}
