package boltstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store/boltstore"
)

// testBucket is the bucket of the stores tests make with New.
const testBucket = "test"

// openStore opens a Store on a new file in t's temporary directory and
// closes it when t ends. It returns the file's path.
func openStore(t *testing.T, opts ...boltstore.Option) (*boltstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idemkit.db")
	s, err := boltstore.Open(path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, path
}

// openDB opens a raw bbolt DB on a new file in t's temporary directory and
// closes it when t ends (after any Store over it, registered later).
func openDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "raw.db"), 0o600, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// newOver returns a Store over db in testBucket, closed when t ends.
func newOver(t *testing.T, db *bolt.DB, opts ...boltstore.Option) *boltstore.Store {
	t.Helper()
	s, err := boltstore.New(db, testBucket, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// rawPut writes value under key in testBucket, bypassing the Store.
func rawPut(t *testing.T, db *bolt.DB, key string, value []byte) {
	t.Helper()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(testBucket)).Put([]byte(key), value)
	}))
}

// rawGet reads the stored bytes under key in testBucket.
func rawGet(t *testing.T, db *bolt.DB, key string) []byte {
	t.Helper()
	var out []byte
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte(testBucket)).Get([]byte(key)); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	}))
	return out
}

// rawCount returns the number of keys in testBucket, expired or not.
func rawCount(t *testing.T, db *bolt.DB) int {
	t.Helper()
	n := 0
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte(testBucket)).Stats().KeyN
		return nil
	}))
	return n
}

// keyDigest is how errors identify key: the first 12 hex digits of its
// SHA-256.
func keyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}
