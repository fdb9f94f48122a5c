package policy

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemkit/idemkit/store"
)

// copyBatch is how many journaled keys the copier takes at a time.
const copyBatch = 64

// forwardIfJournaled copies key forward before an operation on the primary
// touches it. It returns an error only when the primary failed or ctx
// ended.
func (t *Tiered) forwardIfJournaled(ctx context.Context, key string) error {
	if t.flags.Load()&flagJournal == 0 {
		return nil
	}
	if _, ok := t.journal.deadline(key); !ok {
		return nil
	}
	h, err := t.locks.lock(ctx, key)
	if err != nil {
		return err
	}
	defer h.unlock()
	return t.forward(ctx, key)
}

// forward copies one journaled key from the fallback to the primary with
// SetNX and its remaining TTL, then deletes it from the fallback. The
// caller holds key's lock, so no other copy of key and no fallback write
// to it runs meanwhile: a key is copied at most once, and an operation
// that finds it no longer journaled finds it in the primary. It returns an
// error only when the primary failed or ctx ended (the key stays
// journaled); every other outcome is settled, counted and reported.
func (t *Tiered) forward(ctx context.Context, key string) error {
	deadline, ok := t.journal.deadline(key)
	if !ok {
		return nil
	}
	if !deadline.After(time.Now()) {
		t.settle(key, TierEvent{}, &t.skipped)
		return nil
	}
	e, err := t.fallback.Get(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		t.settle(key, TierEvent{}, &t.skipped)
		return nil
	case err != nil && ctx.Err() != nil:
		return err // the caller gave up; try again later
	case err != nil:
		t.settle(key, TierEvent{Kind: TierCopyFailed, Key: key, Err: err}, &t.failed)
		return nil
	}
	set, existing, err := t.primary.SetNX(ctx, key, e.Value, e.TTL)
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, store.ErrUnavailable)):
		return err
	case err != nil:
		t.settle(key, TierEvent{Kind: TierCopyFailed, Key: key, Err: err}, &t.failed)
		return nil
	}
	// The primary now holds the key: the fallback's copy must not outlive
	// it into a later outage, even when the caller gives up now.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.copyTimeout)
	_, _ = t.fallback.CompareAndDelete(dctx, key, e.Value)
	cancel()
	if set || bytes.Equal(existing.Value, e.Value) {
		t.settle(key, TierEvent{Kind: TierCopied, Key: key}, &t.copied)
	} else {
		t.settle(key, TierEvent{Kind: TierConflict, Key: key}, &t.conflicts)
	}
	return nil
}

// settle removes key from the journal and, if this call removed it, counts
// the outcome and reports ev (unless ev has no kind).
func (t *Tiered) settle(key string, ev TierEvent, counter interface{ Add(uint64) uint64 }) {
	if !t.journal.remove(key) {
		return
	}
	counter.Add(1)
	if ev.Kind != "" {
		t.emit(ev)
	}
}

// startCopier starts the background copy-forward unless it runs already,
// the journal is empty, or t is closed.
func (t *Tiered) startCopier() {
	if t.flags.Load()&flagJournal == 0 || t.copying.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !t.copying.CompareAndSwap(false, true) {
		return
	}
	t.wg.Add(1)
	go t.copyForward()
}

// copyForward copies journaled keys to the primary until the journal is
// empty, the breaker leaves the closed state, the primary fails, or t is
// closed. An operation on the primary starts it again while keys remain.
func (t *Tiered) copyForward() {
	defer t.wg.Done()
	defer t.copying.Store(false)
	for {
		keys := t.journal.batch(copyBatch)
		if len(keys) == 0 {
			return
		}
		for _, key := range keys {
			if !t.copyOne(key) {
				return
			}
		}
	}
}

// copyOne forwards one key under the copy timeout and reports whether the
// copier should go on.
func (t *Tiered) copyOne(key string) bool {
	if t.ctx.Err() != nil || t.flags.Load()&flagNotClosed != 0 {
		return false
	}
	h, err := t.locks.lock(t.ctx, key) // only Close stops the wait
	if err != nil {
		return false
	}
	defer h.unlock()
	ctx, cancel := context.WithTimeout(t.ctx, t.copyTimeout)
	defer cancel()
	if err := t.forward(ctx, key); err != nil {
		if t.ctx.Err() == nil && errors.Is(err, store.ErrUnavailable) {
			t.primaryFailed(err)
		}
		return false
	}
	return true
}
