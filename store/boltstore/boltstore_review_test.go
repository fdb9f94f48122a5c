package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// panicOp returns an op whose apply panics, as bbolt does when it meets a
// damaged page.
func panicOp() *op {
	return &op{name: "test", key: "boom", done: make(chan struct{}), apply: func(*bolt.Bucket, time.Time) (bool, error) {
		panic("assertion failed: page 69: has unexpected type/flags: ffff")
	}}
}

// TestReviewPanicInBatchFailsItNotTheProcess queues a panicking op between
// two SetNX calls in one committer transaction. Before the fix the panic
// escaped the committer goroutine and killed the whole process.
func TestReviewPanicInBatchFailsItNotTheProcess(t *testing.T) {
	s, db := newHeld(t)
	block(t, s)
	first := goSetNX(context.Background(), s, "first", "v")
	waitFor(t, "first to queue", func() bool { return len(s.ops) == 1 })
	p := panicOp()
	require.NoError(t, s.enqueue(context.Background(), p))
	last := goSetNX(context.Background(), s, "last", "v")
	waitFor(t, "the ops to queue", func() bool { return len(s.ops) == 3 })
	s.txMu.Unlock()

	<-p.done
	require.ErrorIs(t, p.err, store.ErrCorrupt, "the panicking op fails with ErrCorrupt")
	require.Contains(t, p.err.Error(), `"boom"`, "naming its key")
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

// TestReviewPanicOnDirectPathIsAnError runs a panicking op on the direct
// path: the caller gets an error, and txMu and the transaction are released.
func TestReviewPanicOnDirectPathIsAnError(t *testing.T) {
	s, _ := newHeld(t)
	s.txMu.Unlock()
	var err error
	require.NotPanics(t, func() { err = s.submit(context.Background(), "test", "boom", panicOp().apply) })
	require.ErrorIs(t, err, store.ErrCorrupt)
	set, _, err := s.SetNX(context.Background(), "k", []byte("v"), time.Hour)
	require.NoError(t, err)
	require.True(t, set)
}

// damagedFile writes n keys through a Store at a new path, then overwrites
// the type flags of one leaf page of the bucket, as a torn write or a bad
// disk would. It returns the path and a key stored on the damaged page.
func damagedFile(t *testing.T, pageType string) (path, lostKey string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "damaged.db")
	s, err := Open(path, WithSweepInterval(0), WithNoSync())
	require.NoError(t, err)
	for i := range 2000 {
		_, _, err := s.SetNX(context.Background(), fmt.Sprintf("key-%05d", i), make([]byte, 100), time.Hour)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	var ids []int
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		if pageType == "root" { // the page of the root bucket, holding the store's bucket
			ids = append(ids, int(tx.Cursor().Bucket().Root()))
			return nil
		}
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return nil
			}
			if p.Type == pageType {
				ids = append(ids, id)
			}
		}
	}))
	pageSize := int64(db.Info().PageSize)
	require.NoError(t, db.Close())
	require.NotEmpty(t, ids)
	id := ids[len(ids)/2]

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	page := make([]byte, pageSize)
	_, err = f.ReadAt(page, int64(id)*pageSize)
	require.NoError(t, err)
	if pageType == "leaf" { // the first element's key: header 16 bytes, element {flags, pos, ksize, vsize}
		pos, ksize := binary.LittleEndian.Uint32(page[16+4:]), binary.LittleEndian.Uint32(page[16+8:])
		lostKey = string(page[16+pos : 16+pos+ksize])
	}
	_, err = f.WriteAt([]byte{0xff, 0xff}, int64(id)*pageSize+8)
	require.NoError(t, err)
	return path, lostKey
}

// TestReviewDamagedPageIsAnErrorNotAPanic opens a file with one damaged
// leaf page. Before the fix Len and Sweep panicked, and so did the
// background sweeper and the committer, in goroutines no caller can
// recover, killing the process.
func TestReviewDamagedPageIsAnErrorNotAPanic(t *testing.T) {
	path, lost := damagedFile(t, "leaf")
	require.NotEmpty(t, lost)
	s, err := Open(path, WithSweepInterval(time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	ctx := context.Background()

	checkCorrupt := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrCorrupt, what)
	}
	_, err = s.Len(ctx)
	checkCorrupt("Len", err)
	_, err = s.Sweep(ctx)
	checkCorrupt("Sweep", err)
	_, err = s.Get(ctx, lost)
	checkCorrupt("Get", err)
	require.Contains(t, err.Error(), fmt.Sprintf("%q", lost), "Get names the key")
	_, _, err = s.SetNX(ctx, lost, []byte("v"), time.Hour)
	checkCorrupt("SetNX", err)
	require.Contains(t, err.Error(), fmt.Sprintf("%q", lost), "SetNX names the key")
	_, err = s.Consume(ctx, lost)
	checkCorrupt("Consume", err)

	time.Sleep(20 * time.Millisecond) // let the background sweeper meet the damaged page (no assertion on time)
	e, err := s.Get(ctx, "key-01999")
	require.NoError(t, err, "keys on healthy pages still work")
	require.Len(t, e.Value, 100)
	set, _, err := s.SetNX(ctx, "zzz-new", []byte("v"), time.Hour)
	require.NoError(t, err)
	require.True(t, set)
	requireQueued(t, s)
}

// TestReviewDamagedFreelistFailsOpen damages the freelist page, which
// bbolt reads while opening. Before the fix Open panicked. The damaged
// file stays locked (bbolt's memory map of it holds the lock), but moving
// it aside lets the application start afresh at the same path.
func TestReviewDamagedFreelistFailsOpen(t *testing.T) {
	path, _ := damagedFile(t, "freelist")
	var err error
	require.NotPanics(t, func() { _, err = Open(path, WithOpenTimeout(50*time.Millisecond)) })
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.Contains(t, err.Error(), path)

	require.NoError(t, os.Rename(path, path+".damaged"))
	s, err := Open(path, WithOpenTimeout(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestReviewDamagedRootFailsOpen damages the root bucket's page, which
// creating the bucket in Open reads. Before the fix Open panicked.
func TestReviewDamagedRootFailsOpen(t *testing.T) {
	path, _ := damagedFile(t, "root")
	var err error
	require.NotPanics(t, func() { _, err = Open(path, WithOpenTimeout(50*time.Millisecond)) })
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, err = Open(path, WithOpenTimeout(50*time.Millisecond))
	require.NotErrorIs(t, err, ErrLocked, "the failed Open closed the file")
}

// TestReviewSweepSparesEntryResetAfterScan makes deterministic what
// TestConcurrentSweepAndWrites leaves to scheduling: an entry found
// expired by a sweep's scan and set afresh before its delete survives.
func TestReviewSweepSparesEntryResetAfterScan(t *testing.T) {
	clock := NewFakeClock()
	s, err := Open(filepath.Join(t.TempDir(), "t.db"), WithClock(clock.Now), WithSweepInterval(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		_, _, err := s.SetNX(ctx, k, []byte("old"), time.Second)
		require.NoError(t, err)
	}
	clock.Advance(2 * time.Second)
	keys, last, err := s.scanExpired(ctx, nil)
	require.NoError(t, err)
	require.Len(t, keys, 3)
	require.Nil(t, last)

	set, _, err := s.SetNX(ctx, "b", []byte("new"), time.Hour)
	require.NoError(t, err)
	require.True(t, set)
	n, err := s.deleteExpired(ctx, keys)
	require.NoError(t, err)
	require.Equal(t, 2, n, "only the entries still expired are deleted")
	e, err := s.Get(ctx, "b")
	require.NoError(t, err, "the entry set after the scan survives")
	require.Equal(t, []byte("new"), e.Value)
}
