package boltstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestDurabilityReachesBolt checks the setting bbolt's commit reads: a
// read-write transaction flushes the file (fdatasync) unless the DB's
// NoSync field is set at commit time, and grows it durably unless
// NoGrowSync is. Every behavioural test passes with the flush skipped, so
// this is the test that fails if the Store stops asking for it. The fields
// are read after a committed write, in case anything changes them after
// Open.
func TestDurabilityReachesBolt(t *testing.T) {
	for _, c := range []struct {
		name       string
		opts       []Option
		wantNoSync bool
	}{
		{"default", nil, false},
		{"WithNoSync", []Option{WithNoSync()}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "t.db"), append(c.opts, WithoutSweeper())...)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			set, _, err := s.SetNX(context.Background(), "k", []byte("v"), time.Hour)
			require.NoError(t, err)
			require.True(t, set)
			require.Equal(t, c.wantNoSync, s.db.NoSync, "bbolt's NoSync after Open(%s) and a commit", c.name)
			require.False(t, s.db.NoGrowSync, "bbolt's NoGrowSync after Open(%s): no option skips the flush on growth", c.name)
		})
	}
}

// TestNewKeepsCallersDurability checks that New leaves the caller's DB
// settings as they are, whichever they are.
func TestNewKeepsCallersDurability(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "raw.db"), 0o600, &bolt.Options{NoSync: noSync})
		require.NoError(t, err)
		s, err := New(db, "b", WithoutSweeper())
		require.NoError(t, err)
		set, _, err := s.SetNX(context.Background(), "k", []byte("v"), time.Hour)
		require.NoError(t, err)
		require.True(t, set)
		require.Equal(t, noSync, db.NoSync, "New over a DB opened with NoSync %v", noSync)
		require.NoError(t, s.Close())
		require.NoError(t, db.Close())
	}
}
