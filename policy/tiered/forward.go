package tiered

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/idemkit/idemkit/store"
)

// copyBatch is how many journaled keys the copier takes at a time.
const copyBatch = 64

// copyAttempts bounds how often a copy retries a primary whose value for
// the key changed between its SetNX and its CompareAndSwap.
const copyAttempts = 3

// forwardIfJournaled brings key up to date in the primary before an
// operation on the primary touches it. It returns an error only when the
// primary failed or ctx ended.
func (t *tieredStore) forwardIfJournaled(ctx context.Context, key string) error {
	if t.flags.Load()&flagJournal == 0 {
		return nil
	}
	if _, ok := t.journal.get(key); !ok {
		return nil
	}
	h, err := t.locks.lock(ctx, key)
	if err != nil {
		return err
	}
	defer h.unlock()
	return t.forward(ctx, key)
}

// forward replays key's deferred deletes on the primary, then copies the
// value the fallback holds for key to the primary with its remaining TTL
// and deletes it from the fallback. The caller holds key's lock, so no
// other copy of key and no fallback write to it runs meanwhile: a key is
// copied at most once, and an operation that finds it no longer journaled
// finds it in the primary. It returns an error only when the primary failed
// or ctx ended (what remains stays journaled); every other outcome is
// settled, counted and reported.
func (t *tieredStore) forward(ctx context.Context, key string) error {
	je, ok := t.journal.get(key)
	if !ok {
		return nil
	}
	if err := t.replayDeletes(ctx, key, je.deletes); err != nil {
		return err
	}
	switch {
	case je.expires.IsZero():
		return nil
	case !je.expires.After(time.Now()):
		t.settle(key, Event{}, &t.skipped)
		return nil
	}
	e, err := t.fallback.Get(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		t.settle(key, Event{}, &t.skipped)
		return nil
	case err != nil && ctx.Err() != nil:
		return err // the caller gave up; try again later
	case err != nil:
		t.settle(key, Event{Kind: EventCopyFailed, Key: key, Err: err}, &t.failed)
		return nil
	}
	kind, err := t.copyValue(ctx, key, e)
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, store.ErrUnavailable)):
		return err
	case err != nil:
		t.settle(key, Event{Kind: EventCopyFailed, Key: key, Err: err}, &t.failed)
		return nil
	}
	// The primary now holds the key: the fallback's copy must not outlive
	// it into a later outage, even when the caller gives up now.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.copyTimeout)
	_, _ = t.fallback.CompareAndDelete(dctx, key, e.Value)
	cancel()
	t.settle(key, Event{Kind: kind, Key: key}, t.counter(kind))
	return nil
}

// copyValue writes e to the primary unless the primary holds a value of
// its own for key, and says which: EventCopied (written, or already there),
// EventSuperseded (the primary held an earlier state of e, which e
// replaced) or EventConflict (the primary's value was kept).
func (t *tieredStore) copyValue(ctx context.Context, key string, e store.Entry) (EventKind, error) {
	for range copyAttempts {
		set, held, err := t.primary.SetNX(ctx, key, e.Value, e.TTL)
		switch {
		case err != nil:
			return "", err
		case set || bytes.Equal(held.Value, e.Value):
			return EventCopied, nil
		case !t.supersedes(held.Value, e.Value):
			return EventConflict, nil
		}
		swapped, err := t.primary.CompareAndSwap(ctx, key, held.Value, e.Value, e.TTL)
		switch {
		case err != nil:
			return "", err
		case swapped:
			return EventSuperseded, nil
		}
		// The primary's value changed meanwhile: look again.
	}
	return EventConflict, nil
}

// replayDeletes sends key's deferred deletes to the primary, dropping each
// from the journal once the primary has answered it.
func (t *tieredStore) replayDeletes(ctx context.Context, key string, deletes [][]byte) error {
	for i, old := range deletes {
		_, err := t.primary.CompareAndDelete(ctx, key, old)
		switch {
		case err != nil && (ctx.Err() != nil || errors.Is(err, store.ErrUnavailable)):
			t.journal.replayed(key, i)
			return err
		case err != nil:
			t.failed.Add(1)
			t.emit(Event{Kind: EventCopyFailed, Key: key, Err: err})
		default:
			t.replayedDeletes.Add(1)
		}
	}
	t.journal.replayed(key, len(deletes))
	return nil
}

// counter returns the counter of a copy outcome.
func (t *tieredStore) counter(kind EventKind) counter {
	switch kind {
	case EventSuperseded:
		return &t.superseded
	case EventConflict:
		return &t.conflicts
	}
	return &t.copied
}

type counter interface{ Add(uint64) uint64 }

// settle forgets key's value in the journal and, if this call forgot it,
// counts the outcome and reports ev (unless ev has no kind).
func (t *tieredStore) settle(key string, ev Event, c counter) {
	if !t.journal.settle(key) {
		return
	}
	c.Add(1)
	if ev.Kind != "" {
		t.emit(ev)
	}
}

// startCopier starts the background copy-forward unless it runs already,
// the journal is empty, or t is closed.
func (t *tieredStore) startCopier() {
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

// copyForward brings journaled keys up to date in the primary until the
// journal is empty, the breaker leaves the closed state, the primary
// fails, or t is closed. An operation on the primary starts it again while
// keys remain.
func (t *tieredStore) copyForward() {
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
func (t *tieredStore) copyOne(key string) bool {
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
			t.recordFailure(err)
		}
		return false
	}
	return true
}
