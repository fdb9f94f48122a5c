package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Tx is a store view bound to a pretend database transaction, for testing
// code that completes claims inside a transaction (the engine's
// CompleteIn, an adapter's handler) without a database. CompareAndSwap is
// checked against the base store at once and applied only by Commit;
// every other operation goes straight to the base store. Unlike a
// database, Tx holds no row lock between the check and the commit, so a
// test that changes the record in between sees the later swap fail
// silently at Commit, as a lost lease would. A Tx is safe for concurrent
// use.
type Tx struct {
	store.Store
	mu      sync.Mutex
	pending []func()
}

// NewTx returns a transaction view of s.
func NewTx(s store.Store) *Tx { return &Tx{Store: s} }

// CompareAndSwap reports whether key holds old now, and if so applies the
// swap at Commit.
func (tx *Tx) CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	ent, err := tx.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !bytes.Equal(ent.Value, old) {
		return false, nil
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.pending = append(tx.pending, func() { _, _ = tx.Store.CompareAndSwap(context.WithoutCancel(ctx), key, old, value, ttl) })
	return true, nil
}

// Pending returns how many writes wait for Commit.
func (tx *Tx) Pending() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return len(tx.pending)
}

// Commit applies the pending writes, in order.
func (tx *Tx) Commit() {
	tx.mu.Lock()
	pending := tx.pending
	tx.pending = nil
	tx.mu.Unlock()
	for _, f := range pending {
		f()
	}
}
