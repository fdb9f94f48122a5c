package boltstore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

// invalidOptions are option lists Open and New must reject, with the
// option name their error must contain.
var invalidOptions = []struct {
	name string
	opts []boltstore.Option
}{
	{"WithSweepInterval", []boltstore.Option{boltstore.WithSweepInterval(0)}},
	{"WithSweepInterval", []boltstore.Option{boltstore.WithSweepInterval(-time.Second)}},
	{"WithSweepBatch", []boltstore.Option{boltstore.WithSweepBatch(0)}},
	{"WithSweepBatch", []boltstore.Option{boltstore.WithSweepBatch(-1)}},
	{"WithSweepBatch", []boltstore.Option{boltstore.WithSweepBatch(boltstore.MaxSweepBatch + 1)}},
	{"WithClock", []boltstore.Option{boltstore.WithClock(nil)}},
	{"option 1 is nil", []boltstore.Option{nil}},
	{"WithoutSweeper", []boltstore.Option{boltstore.WithoutSweeper(), boltstore.WithSweepInterval(time.Second)}},
	{"WithoutSweeper", []boltstore.Option{boltstore.WithSweepInterval(time.Second), boltstore.WithoutSweeper()}},
}

// invalidOpenOptions are the options only Open applies, given invalid
// arguments.
var invalidOpenOptions = []struct {
	name string
	opts []boltstore.Option
}{
	{"WithOpenTimeout", []boltstore.Option{boltstore.WithOpenTimeout(0)}},
	{"WithOpenTimeout", []boltstore.Option{boltstore.WithOpenTimeout(-time.Second)}},
	{"WithBucket", []boltstore.Option{boltstore.WithBucket("")}},
	{"WithBucket", []boltstore.Option{boltstore.WithBucket(strings.Repeat("b", bolt.MaxKeySize+1))}},
}

// requireInvalidOption checks that err wraps store.ErrInvalid and names
// the option.
func requireInvalidOption(t *testing.T, err error, name string) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Contains(t, err.Error(), name)
}

func TestOpenRejectsInvalidOptions(t *testing.T) {
	for _, c := range append(invalidOptions, invalidOpenOptions...) {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			s, err := boltstore.Open(path, c.opts...)
			requireInvalidOption(t, err, c.name)
			require.Nil(t, s)
			_, statErr := os.Stat(path)
			require.ErrorIs(t, statErr, os.ErrNotExist, "options are checked before the file is created")
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	db := openDB(t)
	for _, c := range invalidOptions {
		t.Run(c.name, func(t *testing.T) {
			s, err := boltstore.New(db, testBucket, c.opts...)
			requireInvalidOption(t, err, c.name)
			require.Nil(t, s)
		})
	}
}

// TestNewRejectsOpenOnlyOptions: New uses the caller's DB as it is, so an
// option only Open can apply is an error rather than ignored.
func TestNewRejectsOpenOnlyOptions(t *testing.T) {
	db := openDB(t)
	for name, o := range map[string]boltstore.Option{
		"WithOpenTimeout": boltstore.WithOpenTimeout(time.Second),
		"WithNoSync":      boltstore.WithNoSync(),
		"WithBucket":      boltstore.WithBucket("mine"),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := boltstore.New(db, testBucket, o)
			requireInvalidOption(t, err, name)
			require.Nil(t, s)
		})
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	_, err := boltstore.New(nil, "b")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = boltstore.New(openDB(t), "")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = boltstore.New(openDB(t), strings.Repeat("b", bolt.MaxKeySize+1))
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestWithBucket(t *testing.T) {
	s, path := openStore(t, boltstore.WithBucket("mine"))
	mustSetNX(t, s, "k", "v", time.Hour)
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		require.NotNil(t, tx.Bucket([]byte("mine")).Get([]byte("k")))
		return nil
	}))
}

// TestWithoutSweeper checks that WithoutSweeper starts no background
// sweeper goroutine, and that a Store has one by default.
func TestWithoutSweeper(t *testing.T) {
	s, _ := openStore(t, boltstore.WithoutSweeper())
	require.Empty(t, sweeperGoroutines(), "WithoutSweeper starts no sweeper")
	require.NoError(t, s.Close())

	s, _ = openStore(t)
	testkit.WaitFor(t, "the default sweeper to show", func() bool { return len(sweeperGoroutines()) > 0 })
	require.NoError(t, s.Close())
	// Close returns once the sweeper has called wg.Done, which its
	// deferred calls do just before it returns: the goroutine may still
	// be in the dump for a moment, so wait for it to leave.
	testkit.WaitFor(t, "the sweeper to stop after Close", func() bool { return len(sweeperGoroutines()) == 0 })
}

// sweeperGoroutines returns the stacks of running background sweepers.
func sweeperGoroutines() []string {
	var out []string
	for _, g := range storeGoroutines() {
		if strings.Contains(g, "sweepLoop") {
			out = append(out, g)
		}
	}
	return out
}
