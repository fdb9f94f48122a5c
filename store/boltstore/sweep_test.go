package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConcurrentSweepAndWrites runs manual sweeps alongside writers that
// keep replacing expired entries: a sweep deletes only entries that are
// still expired inside its own transaction.
func TestConcurrentSweepAndWrites(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := Open(filepath.Join(t.TempDir(), "t.db"), WithClock(clock), WithoutSweeper(), WithSweepBatch(3))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	for i := range 50 {
		_, _, err := s.SetNX(ctx, fmt.Sprint("k", i), []byte("old"), time.Second)
		require.NoError(t, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := s.Sweep(ctx)
		require.NoError(t, err)
	})
	for i := range 50 {
		set, _, err := s.SetNX(ctx, fmt.Sprint("k", i), []byte("new"), time.Hour)
		require.NoError(t, err)
		require.True(t, set)
	}
	wg.Wait()
	n, err := s.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, 50, n, "the sweep must not delete the fresh entries")
}

// TestSweepSparesEntryResetAfterScan makes deterministic what
// TestConcurrentSweepAndWrites leaves to scheduling: an entry found
// expired by a sweep's scan and set afresh before its delete survives.
func TestSweepSparesEntryResetAfterScan(t *testing.T) {
	clock := NewFakeClock()
	s, err := Open(filepath.Join(t.TempDir(), "t.db"), WithClock(clock.Now), WithoutSweeper())
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
