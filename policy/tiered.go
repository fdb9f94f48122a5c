package policy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/idemkit/idemkit/store"
)

// Bits of Tiered.flags. While all are clear, operations take the fast path:
// straight to the primary, no breaker bookkeeping.
const (
	flagNotClosed uint32 = 1 << iota // the breaker is open or half-open
	flagDirty                        // a primary failure since the last success
	flagJournal                      // fallback keys wait to be copied forward
)

// errExcluded stands, inside the breaker, for an error caused by the
// caller's own context: it counts neither as a success nor as a failure.
var errExcluded = errors.New("policy: caller's context done")

// Tiered is a store.Store over a primary store (typically Redis) and a
// fallback (typically memstore or boltstore), switched by a circuit breaker
// (github.com/sony/gobreaker/v2).
//
// While the breaker is closed every operation goes to the primary only. An
// operation the primary fails with an error wrapping store.ErrUnavailable
// (a Budget overrun, a refused connection) is a failure: it is answered at
// once by the fallback (counted in TieredStats.Retried), so the caller
// still gets an answer. Other errors (ErrInvalid, ErrNotFound, ErrCorrupt)
// and errors caused by the caller's own context are not failures and are
// returned as they are. After the configured number of consecutive failures
// (WithFailureThreshold) the breaker opens and operations go to the
// fallback without trying the primary. After the cool-down (WithCoolDown)
// the breaker is half-open: the next operation probes the primary; if the
// primary answers, the breaker closes, otherwise it opens again.
//
// Every key the fallback stores (a SetNX that set, a CompareAndSwap that
// swapped) is remembered in a bounded journal. When the primary answers
// again, a background goroutine copies each journaled key that is still
// live to the primary with SetNX and its remaining TTL, then deletes it from
// the fallback. If the primary already holds another value for the key, a
// claim made meanwhile through another instance, the primary's value wins:
// the conflict is counted and reported (TierConflict). An operation on a
// journaled key copies that key forward first, so once the primary answers,
// this instance never sees its own outage claims as free. A copy-forward of
// a key and a change to that key in the fallback never interleave (they
// share a per-key lock, striped), so a key is copied at most once, a value
// consumed or deleted meanwhile is not brought back, and a value written
// meanwhile is not dropped from the journal.
//
// What tiering guarantees during an outage: requests that reach this
// instance are deduplicated among themselves from the moment the fallback
// takes over, and their claims reach the primary when it returns. What it
// does not guarantee: deduplication across instances (each has its own
// fallback), nor against keys claimed in the primary before the outage
// (the fallback has never seen them), nor against data the primary itself
// lost (a Redis restarted without persistence). A Tiered is therefore
// weaker than fail-closed and stronger than fail-open.
//
// Close stops the background copy-forward; it does not close the primary
// or the fallback, which the caller owns. A Tiered is safe for concurrent
// use.
type Tiered struct {
	primary, fallback store.Store
	cb                *gobreaker.CircuitBreaker[struct{}]
	flags             atomic.Uint32
	state             atomic.Int32
	journal           *journal
	locks             *keyLocks
	observer          func(TierEvent)
	copyTimeout       time.Duration

	fallbackOps, retried, dropped      atomic.Uint64
	copied, conflicts, skipped, failed atomic.Uint64

	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	mu      sync.Mutex // guards closed and the start of the copier
	closed  bool
	copying atomic.Bool
	wg      sync.WaitGroup
}

var (
	_ store.Store  = (*Tiered)(nil)
	_ store.Closer = (*Tiered)(nil)
	_ store.Pinger = (*Tiered)(nil)
)

// NewTiered returns a Tiered store over primary and fallback, configured by
// opts. It panics if either store is nil.
func NewTiered(primary, fallback store.Store, opts ...TieredOption) *Tiered {
	if primary == nil || fallback == nil {
		panic("policy: NewTiered with a nil store")
	}
	c := defaultTieredConfig()
	for _, o := range opts {
		o(&c)
	}
	t := &Tiered{
		primary:     primary,
		fallback:    fallback,
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
	return t
}

// stateChanged mirrors the breaker's state into t's atomics and reports it.
// It runs under the breaker's lock.
func (t *Tiered) stateChanged(_ string, _, to gobreaker.State) {
	var kind TierEventKind
	switch to {
	case gobreaker.StateClosed:
		t.state.Store(int32(BreakerClosed))
		t.flags.And(^(flagNotClosed | flagDirty))
		kind = TierClosed
	case gobreaker.StateHalfOpen:
		t.state.Store(int32(BreakerHalfOpen))
		t.flags.Or(flagNotClosed)
		kind = TierHalfOpen
	default:
		t.state.Store(int32(BreakerOpen))
		t.flags.Or(flagNotClosed)
		kind = TierOpen
	}
	t.emit(TierEvent{Kind: kind})
}

func (t *Tiered) emit(ev TierEvent) {
	if t.observer != nil {
		t.observer(ev)
	}
}

// State returns the breaker's state as of the last operation (an open
// breaker whose cool-down has passed turns half-open at the next one).
func (t *Tiered) State() BreakerState { return BreakerState(t.state.Load()) }

// Stats returns the Tiered's counters.
func (t *Tiered) Stats() TieredStats {
	return TieredStats{
		State:          t.State(),
		FallbackOps:    t.fallbackOps.Load(),
		Retried:        t.retried.Load(),
		Journal:        t.journal.len(),
		JournalDropped: t.dropped.Load(),
		Copied:         t.copied.Load(),
		Conflicts:      t.conflicts.Load(),
		Skipped:        t.skipped.Load(),
		CopyFailed:     t.failed.Load(),
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
func (t *Tiered) fast() bool { return t.flags.Load() == 0 }

// primaryFailed records a failure seen on the fast path (or by the copier)
// with the breaker.
func (t *Tiered) primaryFailed(err error) {
	t.flags.Or(flagDirty)
	_, _ = t.cb.Execute(func() (struct{}, error) { return struct{}{}, err })
}

// viaPrimary runs call on the primary through the breaker, first copying
// key forward if it is journaled. It reports whether the primary answered;
// if not (breaker open, or a failure), the caller turns to the fallback.
func (t *Tiered) viaPrimary(ctx context.Context, key string, call func() error) (bool, error) {
	var callErr error
	_, err := t.cb.Execute(func() (struct{}, error) {
		if callErr = t.forwardIfJournaled(ctx, key); callErr == nil {
			callErr = call()
		}
		return struct{}{}, verdict(ctx, callErr)
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return false, nil
	}
	if failure(ctx, callErr) {
		t.flags.Or(flagDirty)
		t.retried.Add(1)
		return false, nil
	}
	if ctx.Err() == nil {
		t.primaryAnswered()
	}
	return true, callErr
}

// primaryAnswered clears the failure streak once the breaker is closed and
// starts copying journaled keys forward.
func (t *Tiered) primaryAnswered() {
	if t.State() != BreakerClosed {
		return
	}
	t.flags.And(^flagDirty)
	t.startCopier()
}

// journalWrite remembers a key the fallback stored, with its TTL.
func (t *Tiered) journalWrite(key string, ttl time.Duration) {
	if !t.journal.add(key, time.Now().Add(ttl)) {
		t.dropped.Add(1)
		t.emit(TierEvent{Kind: TierJournalFull, Key: key})
	}
}

// onFallback runs change, an operation that may change key in the
// fallback, under key's lock, so that it never interleaves with a
// copy-forward of key: a copy that read the key's old value cannot then
// settle it and drop the new one, nor write a consumed or deleted value to
// the primary.
func (t *Tiered) onFallback(ctx context.Context, key string, change func() error) error {
	t.fallbackOps.Add(1)
	h, err := t.locks.lock(ctx, key)
	if err != nil {
		return err
	}
	defer h.unlock()
	return change()
}

// SetNX implements store.Store.
func (t *Tiered) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if t.fast() {
		set, e, err := t.primary.SetNX(ctx, key, value, ttl)
		if !failure(ctx, err) {
			return set, e, err
		}
		t.primaryFailed(err)
		t.retried.Add(1)
	} else {
		var set bool
		var e store.Entry
		answered, err := t.viaPrimary(ctx, key, func() (err error) {
			set, e, err = t.primary.SetNX(ctx, key, value, ttl)
			return err
		})
		if answered {
			return set, e, err
		}
	}
	var set bool
	var e store.Entry
	err := t.onFallback(ctx, key, func() (err error) {
		set, e, err = t.fallback.SetNX(ctx, key, value, ttl)
		if set && err == nil {
			t.journalWrite(key, ttl)
		}
		return err
	})
	return set, e, err
}

// Get implements store.Store.
func (t *Tiered) Get(ctx context.Context, key string) (store.Entry, error) {
	if t.fast() {
		e, err := t.primary.Get(ctx, key)
		if !failure(ctx, err) {
			return e, err
		}
		t.primaryFailed(err)
		t.retried.Add(1)
	} else {
		var e store.Entry
		answered, err := t.viaPrimary(ctx, key, func() (err error) {
			e, err = t.primary.Get(ctx, key)
			return err
		})
		if answered {
			return e, err
		}
	}
	t.fallbackOps.Add(1)
	return t.fallback.Get(ctx, key)
}

// CompareAndSwap implements store.Store.
func (t *Tiered) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if t.fast() {
		ok, err := t.primary.CompareAndSwap(ctx, key, old, new, ttl)
		if !failure(ctx, err) {
			return ok, err
		}
		t.primaryFailed(err)
		t.retried.Add(1)
	} else {
		var ok bool
		answered, err := t.viaPrimary(ctx, key, func() (err error) {
			ok, err = t.primary.CompareAndSwap(ctx, key, old, new, ttl)
			return err
		})
		if answered {
			return ok, err
		}
	}
	var ok bool
	err := t.onFallback(ctx, key, func() (err error) {
		ok, err = t.fallback.CompareAndSwap(ctx, key, old, new, ttl)
		if ok && err == nil {
			t.journalWrite(key, ttl)
		}
		return err
	})
	return ok, err
}

// CompareAndDelete implements store.Store.
func (t *Tiered) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if t.fast() {
		ok, err := t.primary.CompareAndDelete(ctx, key, old)
		if !failure(ctx, err) {
			return ok, err
		}
		t.primaryFailed(err)
		t.retried.Add(1)
	} else {
		var ok bool
		answered, err := t.viaPrimary(ctx, key, func() (err error) {
			ok, err = t.primary.CompareAndDelete(ctx, key, old)
			return err
		})
		if answered {
			return ok, err
		}
	}
	var ok bool
	err := t.onFallback(ctx, key, func() (err error) {
		ok, err = t.fallback.CompareAndDelete(ctx, key, old)
		return err
	})
	return ok, err
}

// Consume implements store.Store.
func (t *Tiered) Consume(ctx context.Context, key string) ([]byte, error) {
	if t.fast() {
		v, err := t.primary.Consume(ctx, key)
		if !failure(ctx, err) {
			return v, err
		}
		t.primaryFailed(err)
		t.retried.Add(1)
	} else {
		var v []byte
		answered, err := t.viaPrimary(ctx, key, func() (err error) {
			v, err = t.primary.Consume(ctx, key)
			return err
		})
		if answered {
			return v, err
		}
	}
	var v []byte
	err := t.onFallback(ctx, key, func() (err error) {
		v, err = t.fallback.Consume(ctx, key)
		return err
	})
	return v, err
}

// Ping reports whether the Tiered can serve: nil when the primary answers,
// or when it does not but the fallback does (State and Stats tell which).
// A store that is not a store.Pinger is taken to answer. When neither
// answers, the error wraps store.ErrUnavailable.
func (t *Tiered) Ping(ctx context.Context) error {
	perr := ping(ctx, t.primary)
	if perr == nil {
		return nil
	}
	ferr := ping(ctx, t.fallback)
	if ferr == nil {
		return nil
	}
	return store.Unavailable("policy: tiered ping", errors.Join(perr, ferr))
}

func ping(ctx context.Context, s store.Store) error {
	if p, ok := s.(store.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Close stops the background copy-forward and waits for it to exit. It
// does not close the primary or the fallback. Operations still work after
// Close, but keys are copied forward only when an operation touches them.
// Close always returns nil.
func (t *Tiered) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	return nil
}
