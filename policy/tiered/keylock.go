package tiered

import (
	"context"
	"hash/maphash"
)

// lockStripes is how many locks a keyLocks spreads keys over.
const lockStripes = 256

// keyLocks serialises work on one key (striped: unrelated keys may share a
// lock). A Tiered holds a key's lock while it copies the key forward and
// while it changes the key in the fallback, so neither sees the other half
// done. Waiting for a lock honours the waiter's context.
type keyLocks struct {
	seed  maphash.Seed
	locks [lockStripes]chan struct{}
}

func newKeyLocks() *keyLocks {
	l := &keyLocks{seed: maphash.MakeSeed()}
	for i := range l.locks {
		l.locks[i] = make(chan struct{}, 1)
	}
	return l
}

// heldLock is a lock taken by keyLocks.lock.
type heldLock chan struct{}

// unlock releases the lock.
func (h heldLock) unlock() { <-h }

// lock takes key's lock, or returns an error wrapping ctx.Err() (and
// store.ErrUnavailable for a deadline) when ctx ends first.
func (l *keyLocks) lock(ctx context.Context, key string) (heldLock, error) {
	ch := l.locks[maphash.String(l.seed, key)%lockStripes]
	select {
	case ch <- struct{}{}:
		return ch, nil
	default:
	}
	select {
	case ch <- struct{}{}:
		return ch, nil
	case <-ctx.Done():
		return nil, callerDone("waiting for a copy-forward", ctx.Err())
	}
}
