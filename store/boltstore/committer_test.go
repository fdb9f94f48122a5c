package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// These tests hold txMu, as a caller running its own transaction would,
// so that the committer waits and operations pile up in its queue.

func newHeld(t *testing.T) (*Store, *bolt.DB) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	s, err := New(db, "b", WithoutSweeper())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	s.txMu.Lock()
	return s, db
}

// writeTxID returns the ID of the last committed write transaction.
func writeTxID(t *testing.T, db *bolt.DB) int {
	t.Helper()
	var id int
	require.NoError(t, db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

type setResult struct {
	value    string
	set      bool
	existing store.Entry
	err      error
}

// goSetNX runs SetNX in a new goroutine and returns where its result comes.
func goSetNX(ctx context.Context, s *Store, key, value string) <-chan setResult {
	ch := make(chan setResult, 1)
	go func() {
		set, e, err := s.SetNX(ctx, key, []byte(value), time.Hour)
		ch <- setResult{value, set, e, err}
	}()
	return ch
}

// block hands the committer a no-op and waits until it has taken it off
// the queue; the committer then waits for txMu, which the test holds.
func block(t *testing.T, s *Store) {
	t.Helper()
	o := &op{apply: func(*bolt.Bucket, time.Time) (bool, error) { return false, nil }, done: make(chan struct{})}
	require.NoError(t, s.enqueue(context.Background(), o))
	testkit.WaitFor(t, "the committer to take the no-op", func() bool { return len(s.ops) == 0 })
}

// queueSetNX blocks the committer, starts n SetNX calls on key, each with
// its own value, and waits until all are queued.
func queueSetNX(t *testing.T, s *Store, key string, n int) []<-chan setResult {
	t.Helper()
	block(t, s)
	var out []<-chan setResult
	for i := range n {
		out = append(out, goSetNX(context.Background(), s, key, fmt.Sprint("v", i)))
	}
	testkit.WaitFor(t, "the ops to queue", func() bool { return len(s.ops) == n })
	return out
}

func TestOneBatchOneWinnerAndOneCommit(t *testing.T) {
	s, db := newHeld(t)
	rawPut(t, db, "bad", []byte{7})
	before := writeTxID(t, db)
	same := queueSetNX(t, s, "same", 10)
	bad := goSetNX(context.Background(), s, "bad", "x")
	other := goSetNX(context.Background(), s, "other", "x")
	testkit.WaitFor(t, "the ops to queue", func() bool { return len(s.ops) == 12 })
	s.txMu.Unlock()

	var winners, losers []setResult
	for _, ch := range same {
		r := <-ch
		require.NoError(t, r.err)
		if r.set {
			winners = append(winners, r)
		} else {
			losers = append(losers, r)
		}
	}
	require.Len(t, winners, 1)
	for _, l := range losers {
		require.Equal(t, winners[0].value, string(l.existing.Value), "later ops see the effects of earlier ones")
	}
	r := <-bad
	require.ErrorIs(t, r.err, store.ErrCorrupt, "an op's own error is its alone")
	require.Equal(t, []byte{7}, rawGet(t, db, "bad"))
	r = <-other
	require.NoError(t, r.err, "another op's error does not fail the batch")
	require.True(t, r.set)
	require.Equal(t, before+1, writeTxID(t, db), "the queued ops share one commit")
}

func TestFailedCommitFailsEveryCaller(t *testing.T) {
	s, db := newHeld(t)
	chans := queueSetNX(t, s, "k", 5)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("b")) }))
	s.txMu.Unlock()
	for _, ch := range chans {
		r := <-ch
		require.ErrorIs(t, r.err, store.ErrUnavailable)
		require.False(t, r.set)
	}
}

func TestCloseFailsQueuedCallers(t *testing.T) {
	s, _ := newHeld(t)
	chans := queueSetNX(t, s, "k", 8)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	testkit.WaitFor(t, "Close to begin", s.quitting)
	s.txMu.Unlock()
	for _, ch := range chans {
		r := <-ch
		require.ErrorIs(t, r.err, ErrClosed)
		require.ErrorIs(t, r.err, store.ErrUnavailable)
	}
	require.NoError(t, <-closed)
}

func TestCancelBeforeTakenNeverRuns(t *testing.T) {
	s, db := newHeld(t)
	block(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	second := goSetNX(ctx, s, "second", "v")
	testkit.WaitFor(t, "the op to queue", func() bool { return len(s.ops) == 1 })
	cancel()
	r := <-second
	require.ErrorIs(t, r.err, context.Canceled)
	require.NotErrorIs(t, r.err, store.ErrUnavailable, "the op never ran, so its outcome is known")
	s.txMu.Unlock()
	set, _, err := s.SetNX(context.Background(), "third", []byte("v"), time.Hour)
	require.NoError(t, err)
	require.True(t, set)
	require.Nil(t, rawGet(t, db, "second"), "an abandoned op never runs")
}

func TestCancelAfterTakenReportsUnknownOutcome(t *testing.T) {
	s, db := newHeld(t)
	block(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	o := &op{done: make(chan struct{}), apply: func(b *bolt.Bucket, _ time.Time) (bool, error) {
		return true, b.Put([]byte("k"), encode([]byte("v"), 1<<62))
	}}
	require.NoError(t, s.enqueue(ctx, o))
	tx, err := db.Begin(true) // the committer's transaction will wait for this one
	require.NoError(t, err)
	s.txMu.Unlock()
	testkit.WaitFor(t, "the committer to take the op", func() bool { return o.state.Load() == opTaken })
	cancel()
	err = s.await(ctx, "test", o)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, store.ErrUnavailable, "a taken op's outcome is unknown to a caller that left")
	require.NoError(t, tx.Rollback())
	<-o.done
	require.NoError(t, o.err)
	require.NotNil(t, rawGet(t, db, "k"), "a taken op runs to the end")
}

// rawPut writes value under key in bucket "b", bypassing the Store.
func rawPut(t *testing.T, db *bolt.DB, key string, value []byte) {
	t.Helper()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put([]byte(key), value) }))
}

// rawGet reads the stored bytes under key in bucket "b".
func rawGet(t *testing.T, db *bolt.DB, key string) []byte {
	t.Helper()
	var out []byte
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("b")).Get([]byte(key)); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	}))
	return out
}

// TestNoCommitWhenNothingChanged checks that operations that change
// nothing (a losing SetNX, failed compares, a Consume of an absent key)
// roll their transaction back instead of committing and flushing.
func TestNoCommitWhenNothingChanged(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	s, err := New(db, "b", WithoutSweeper())
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	_, _, err = s.SetNX(ctx, "k", []byte("v"), time.Hour)
	require.NoError(t, err)
	before := writeTxID(t, db)

	set, existing, err := s.SetNX(ctx, "k", []byte("w"), time.Hour)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, []byte("v"), existing.Value)
	ok, err := s.CompareAndSwap(ctx, "k", []byte("x"), []byte("y"), time.Hour)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = s.CompareAndDelete(ctx, "k", []byte("x"))
	require.NoError(t, err)
	require.False(t, ok)
	_, err = s.Consume(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotFound)
	removed, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, removed)
	require.Equal(t, before, writeTxID(t, db), "nothing changed, so nothing was committed")

	_, err = s.Consume(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, before+1, writeTxID(t, db))
}

// panicOp returns an op whose apply panics, as bbolt does when it meets a
// damaged page.
func panicOp() *op {
	return &op{name: "test", key: "boom", done: make(chan struct{}), apply: func(*bolt.Bucket, time.Time) (bool, error) {
		panic("assertion failed: page 69: has unexpected type/flags: ffff")
	}}
}

// TestPanicInBatchFailsItNotTheProcess queues a panicking op between
// two SetNX calls in one committer transaction. Before the fix the panic
// escaped the committer goroutine and killed the whole process.
func TestPanicInBatchFailsItNotTheProcess(t *testing.T) {
	s, db := newHeld(t)
	block(t, s)
	first := goSetNX(context.Background(), s, "first", "v")
	testkit.WaitFor(t, "first to queue", func() bool { return len(s.ops) == 1 })
	p := panicOp()
	require.NoError(t, s.enqueue(context.Background(), p))
	last := goSetNX(context.Background(), s, "last", "v")
	testkit.WaitFor(t, "the ops to queue", func() bool { return len(s.ops) == 3 })
	s.txMu.Unlock()

	<-p.done
	require.ErrorIs(t, p.err, store.ErrCorrupt, "the panicking op fails with ErrCorrupt")
	require.Contains(t, p.err.Error(), wantRef("boom"), "identifying its key by its digest")
	for _, ch := range []<-chan setResult{first, last} {
		r := <-ch
		require.ErrorIs(t, r.err, store.ErrUnavailable, "the others in its rolled-back transaction fail too")
		require.False(t, r.set)
	}
	require.Nil(t, rawGet(t, db, "first"), "nothing of the panicked transaction was committed")
	require.Nil(t, rawGet(t, db, "last"))

	set, _, err := s.SetNX(context.Background(), "after", []byte("v"), time.Hour)
	require.NoError(t, err, "the committer goes on")
	require.True(t, set)
	requireQueued(t, s)
}

// requireQueued checks that an op going through the queue (not the direct
// path) still gets an answer, i.e. the committer goroutine is alive.
func requireQueued(t *testing.T, s *Store) {
	t.Helper()
	o := &op{name: "test", done: make(chan struct{}), apply: func(*bolt.Bucket, time.Time) (bool, error) { return false, nil }}
	require.NoError(t, s.enqueue(context.Background(), o))
	require.NoError(t, s.await(context.Background(), "test", o))
}

// TestPanicOnDirectPathIsAnError runs a panicking op on the direct
// path: the caller gets an error, and txMu and the transaction are released.
func TestPanicOnDirectPathIsAnError(t *testing.T) {
	s, _ := newHeld(t)
	s.txMu.Unlock()
	var err error
	require.NotPanics(t, func() { err = s.submit(context.Background(), "test", "boom", panicOp().apply) })
	require.ErrorIs(t, err, store.ErrCorrupt)
	set, _, err := s.SetNX(context.Background(), "k", []byte("v"), time.Hour)
	require.NoError(t, err)
	require.True(t, set)
}

// TestRollbackErrorAbortsTheTransaction: an op that fails with changes
// left behind (errRollback) makes the committer roll the whole
// transaction back, so that none of its changes is committed.
func TestRollbackErrorAbortsTheTransaction(t *testing.T) {
	s, db := newHeld(t)
	block(t, s)
	first := goSetNX(context.Background(), s, "first", "v")
	testkit.WaitFor(t, "first to queue", func() bool { return len(s.ops) == 1 })
	o := &op{name: "test", done: make(chan struct{}), apply: func(b *bolt.Bucket, _ time.Time) (bool, error) {
		if err := b.Put([]byte("half"), encode([]byte("v"), 1<<62)); err != nil {
			return false, err
		}
		return false, fmt.Errorf("undo failed: %w", errRollback)
	}}
	require.NoError(t, s.enqueue(context.Background(), o))
	testkit.WaitFor(t, "the op to queue", func() bool { return len(s.ops) == 2 })
	before := writeTxID(t, db)
	s.txMu.Unlock()

	<-o.done
	require.ErrorIs(t, o.err, errRollback)
	r := <-first
	require.ErrorIs(t, r.err, store.ErrUnavailable, "the others in the rolled-back transaction fail")
	require.Nil(t, rawGet(t, db, "half"))
	require.Nil(t, rawGet(t, db, "first"))
	require.Equal(t, before, writeTxID(t, db), "nothing was committed")
	requireQueued(t, s)
}
