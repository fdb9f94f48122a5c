package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
)

// damagedFile writes 2000 keys (prefix followed by a number) through a
// Store at a new path, then overwrites the type flags of one page of type
// pageType, as a torn write or a bad disk would. It returns the path and,
// for a leaf page, a key stored on the damaged page.
func damagedFile(t *testing.T, pageType, prefix string) (path, lostKey string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "damaged.db")
	s, err := Open(path, WithoutSweeper(), WithNoSync())
	require.NoError(t, err)
	for i := range 2000 {
		_, _, err := s.SetNX(context.Background(), fmt.Sprintf("%s%05d", prefix, i), make([]byte, 100), time.Hour)
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

// TestDamagedPageIsAnErrorNotAPanic opens a file with one damaged
// leaf page. Before the fix Len and Sweep panicked, and so did the
// background sweeper and the committer, in goroutines no caller can
// recover, killing the process.
func TestDamagedPageIsAnErrorNotAPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path, lost := damagedFile(t, "leaf", "key-")
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
		require.Contains(t, err.Error(), wantRef(lost), "Get identifies the key by its digest")
		_, _, err = s.SetNX(ctx, lost, []byte("v"), time.Hour)
		checkCorrupt("SetNX", err)
		require.Contains(t, err.Error(), wantRef(lost), "SetNX identifies the key by its digest")
		_, err = s.Consume(ctx, lost)
		checkCorrupt("Consume", err)

		// Twenty ticks of the background sweeper, on the bubble's clock, meet
		// the damaged page.
		time.Sleep(20 * time.Millisecond)
		e, err := s.Get(ctx, "key-01999")
		require.NoError(t, err, "keys on healthy pages still work")
		require.Len(t, e.Value, 100)
		set, _, err := s.SetNX(ctx, "zzz-new", []byte("v"), time.Hour)
		require.NoError(t, err)
		require.True(t, set)
		requireQueued(t, s)
	})
}

// TestDamagedFreelistFailsOpen damages the freelist page, which
// bbolt reads while opening. Before the fix Open panicked. The damaged
// file stays locked (bbolt's memory map of it holds the lock), but moving
// it aside lets the application start afresh at the same path.
func TestDamagedFreelistFailsOpen(t *testing.T) {
	path, _ := damagedFile(t, "freelist", "key-")
	var err error
	require.NotPanics(t, func() { _, err = Open(path, WithOpenTimeout(50*time.Millisecond)) })
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.Contains(t, err.Error(), path)

	require.NoError(t, os.Rename(path, path+".damaged"))
	s, err := Open(path, WithOpenTimeout(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestDamagedRootFailsOpen damages the root bucket's page, which
// creating the bucket in Open reads. Before the fix Open panicked.
func TestDamagedRootFailsOpen(t *testing.T) {
	path, _ := damagedFile(t, "root", "key-")
	var err error
	require.NotPanics(t, func() { _, err = Open(path, WithOpenTimeout(50*time.Millisecond)) })
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, err = Open(path, WithOpenTimeout(50*time.Millisecond))
	require.NotErrorIs(t, err, ErrLocked, "the failed Open closed the file")
}
