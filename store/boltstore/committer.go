package boltstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// applyFunc applies one operation to the bucket inside the committer's
// read-write transaction, recording its answer in variables it captured.
// It reports whether it changed the bucket, and returns the operation's
// own error; that error never aborts the transaction, so an applyFunc
// must check everything before it writes and leave no change behind when
// it fails, or else wrap errRollback in its error.
type applyFunc func(b *bolt.Bucket, now time.Time) (wrote bool, err error)

// States of an op.
const (
	opPending   int32 = iota // queued, not yet taken by the committer
	opTaken                  // the committer will run it
	opAbandoned              // its caller left first; it never runs
)

// op is one write operation handed to the committer.
type op struct {
	state atomic.Int32
	name  string // prefixes errors the committer makes for this op
	key   string // the key, named by the error of an apply that panics
	apply applyFunc
	// panicked is set when apply panicked; the committer reads it only.
	panicked bool
	err      error         // the answer's error, set before done is closed
	done     chan struct{} // closed when the answer is ready
}

// submit runs apply in the committer's next transaction and returns its
// error once that transaction has committed. name prefixes errors; key
// (empty when there is no single key) is named when apply panics.
func (s *Store) submit(ctx context.Context, name, key string, apply applyFunc) error {
	if err := ctx.Err(); err != nil {
		return ctxError(name, err)
	}
	if ran, err := s.tryDirect(name, key, apply); ran {
		return err
	}
	o := &op{name: name, key: key, apply: apply, done: make(chan struct{})}
	if err := s.enqueue(ctx, o); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return s.await(ctx, name, o)
}

// tryDirect runs apply in a transaction of its own on the caller's
// goroutine when nothing is queued and the committer is idle, which saves
// the two goroutine hand-offs of the queue on a lightly loaded Store. It
// reports whether it ran (or found the Store closed). The committer keeps
// txMu for as long as it finds work queued, so under load every caller
// goes through the queue and shares its commits.
func (s *Store) tryDirect(name, key string, apply applyFunc) (bool, error) {
	if len(s.ops) != 0 || s.busy.Load() {
		return false, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return true, fmt.Errorf("%s: %w", name, ErrClosed)
	}
	if !s.txMu.TryLock() {
		return false, nil
	}
	defer s.txMu.Unlock()
	o := op{name: name, key: key, apply: apply}
	ops := [1]*op{&o}
	s.run(ops[:])
	return true, o.err
}

// enqueue hands o to the committer unless the Store is closed or ctx ends
// while the queue is full.
func (s *Store) enqueue(ctx context.Context, o *op) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.ops <- o:
		return nil
	case <-ctx.Done():
		return ctxError("enqueue", ctx.Err())
	}
}

// await waits for o's answer. When ctx ends first and the committer has
// not taken o, o is abandoned and never runs; when it has, the outcome is
// unknown to this caller.
func (s *Store) await(ctx context.Context, name string, o *op) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
	}
	if o.state.CompareAndSwap(opPending, opAbandoned) {
		return ctxError(name, ctx.Err())
	}
	select {
	case <-o.done: // the answer came at the same time
		return o.err
	default:
		return store.Unavailable(name+": outcome unknown", ctx.Err())
	}
}

// errReadOnly makes bbolt roll back a transaction that changed nothing.
var errReadOnly = errors.New("boltstore: nothing to commit")

// commitLoop is the committer goroutine: it takes everything queued (up
// to MaxBatch operations), runs it in one transaction, answers, and
// repeats until Close.
func (s *Store) commitLoop() {
	defer s.wg.Done()
	batch := make([]*op, 0, MaxBatch)
	for {
		select {
		case <-s.quit:
			s.failQueued()
			return
		case o := <-s.ops:
			s.busy.Store(true) // keep new callers from going direct
			s.txMu.Lock()      // wait for a caller running its own transaction
			s.drain(append(batch[:0], o))
			s.txMu.Unlock()
			s.busy.Store(false)
		}
	}
}

// drain commits batch and whatever queues meanwhile, one transaction
// after another, until the queue is empty or Close has begun; in the
// latter case the operations not yet taken fail with ErrClosed.
func (s *Store) drain(batch []*op) {
	for len(batch) > 0 {
		if s.quitting() {
			failAll(batch)
			return
		}
		batch = s.collect(batch)
		s.commit(takeAll(batch))
		clear(batch[:cap(batch)])
		batch = s.collect(batch[:0])
	}
}

// quitting reports whether Close has begun.
func (s *Store) quitting() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// collect appends to batch whatever is queued, without waiting, up to
// MaxBatch operations.
func (s *Store) collect(batch []*op) []*op {
	for len(batch) < MaxBatch {
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// takeAll marks the operations of batch as taken and returns those whose
// callers had not left, reusing batch's memory.
func takeAll(batch []*op) []*op {
	taken := batch[:0]
	for _, o := range batch {
		if o.state.CompareAndSwap(opPending, opTaken) {
			taken = append(taken, o)
		}
	}
	return taken
}

// commit runs ops in one transaction and answers each caller.
func (s *Store) commit(ops []*op) {
	if len(ops) == 0 {
		return
	}
	s.run(ops)
	for _, o := range ops {
		close(o.done)
	}
}

// run applies ops in order in one read-write transaction and commits it,
// setting each op's err. When the commit fails, every op's err wraps
// store.ErrUnavailable. When no op changed anything the transaction is
// rolled back instead, saving the flush: what the ops read was already
// durable, since every commit is flushed before the next transaction.
//
// bbolt panics when it meets a damaged page. run turns such a panic into
// errors, since in the committer goroutine nobody could recover it and it
// would kill the process: the transaction is rolled back, the op that
// panicked fails with store.ErrCorrupt naming its key, and the others
// with store.ErrUnavailable.
func (s *Store) run(ops []*op) {
	err := s.runTx(ops)
	switch {
	case err == nil || err == errReadOnly:
		return
	case err == errPanicked:
		for _, o := range ops {
			if !o.panicked {
				o.err = store.Unavailable(o.name+": rolled back", errPanicked)
			}
		}
	default:
		for _, o := range ops {
			o.err = store.Unavailable("boltstore: commit", err)
		}
	}
}

// runTx runs ops in one read-write transaction. It returns errReadOnly
// when it rolled back because nothing changed, errPanicked when an op
// panicked (that op's err says so), or bbolt's error, wrapping
// store.ErrCorrupt when bbolt panicked outside the ops.
func (s *Store) runTx(ops []*op) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError("boltstore: transaction", "", p)
		}
	}()
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(s.bucket)
		if b == nil {
			return errNoBucket
		}
		now := s.cfg.now()
		changed := false
		for _, o := range ops {
			wrote, panicked := o.run(b, now)
			if panicked {
				return errPanicked
			}
			changed = changed || wrote
		}
		if !changed {
			return errReadOnly
		}
		return nil
	})
}

// run applies o, setting o.err, and reports whether it wrote and whether
// it panicked.
func (o *op) run(b *bolt.Bucket, now time.Time) (wrote, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			wrote, panicked = false, true
			o.panicked = true
			o.err = panicError(o.name, o.key, p)
		}
	}()
	wrote, o.err = o.apply(b, now)
	if errors.Is(o.err, errRollback) {
		o.panicked = true
		return false, true
	}
	return wrote, false
}

// errPanicked makes bbolt roll back a transaction in which an op panicked
// or could not undo its own changes.
var errPanicked = errors.New("an operation in the transaction panicked or failed to undo its changes")

// errRollback, in the error of an applyFunc, says that it failed and left
// changes behind: the committer rolls the whole transaction back, as for
// a panic.
var errRollback = errors.New("boltstore: the transaction must roll back")

// panicError describes a recovered panic of bbolt, which it raises on
// damaged pages, as an error wrapping store.ErrCorrupt that identifies
// key by its digest when there is one. The panic's text is scrubbed of
// hex runs, which may be key bytes.
func panicError(name, key string, p any) error {
	if key == "" {
		return fmt.Errorf("%s: %w: bbolt panicked (is the file damaged?): %s", name, store.ErrCorrupt, scrub(p))
	}
	return fmt.Errorf("%s: %w: %s: bbolt panicked (is the file damaged?): %s", name, store.ErrCorrupt, keyRef(key), scrub(p))
}

// failQueued answers every operation still queued with ErrClosed. It runs
// after Close has marked the Store closed, so nothing more is queued.
func (s *Store) failQueued() {
	for {
		select {
		case o := <-s.ops:
			failAll([]*op{o})
		default:
			return
		}
	}
}

// failAll answers ops with ErrClosed without running them.
func failAll(ops []*op) {
	for _, o := range ops {
		o.err = ErrClosed
		close(o.done)
	}
}
