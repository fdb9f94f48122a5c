package boltstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// secretKey looks like the store keys an adapter writes when it keeps the
// caller's key readable: a principal and a bearer token.
const secretKey = "idem:t:alice@example.com:tok_live_9f8e7d6c5b4a"

// secretParts are the pieces of secretKey no error text may show, in any
// of the spellings an error could use.
var secretParts = []string{"alice@example.com", "tok_live_9f8e7d6c5b4a"}

// wantRef is how an error identifies key: the first 12 hex digits of its
// SHA-256, computed here independently of the code under test.
func wantRef(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// requireRedacted fails t when err is nil or its text shows any part of a
// secret key raw, quoted or hex-encoded. When ref is not empty the text
// must contain it, so that the key stays identifiable.
func requireRedacted(t *testing.T, what string, err error, ref string) {
	t.Helper()
	require.Error(t, err, what)
	text := err.Error()
	for _, p := range secretParts {
		for _, spelling := range []string{p, fmt.Sprintf("%q", p), hex.EncodeToString([]byte(p)), fmt.Sprintf("%x", p)} {
			require.NotContains(t, text, spelling, "%s: error text shows a secret: %s", what, text)
		}
	}
	if ref != "" {
		require.Contains(t, text, ref, "%s: error text must identify the key by its digest", what)
	}
}

// callAll runs every keyed operation of s on key and returns their errors
// by name.
func callAll(s *Store, key string) map[string]error {
	ctx := context.Background()
	errs := map[string]error{}
	_, errs["Get"] = s.Get(ctx, key)
	_, _, errs["SetNX"] = s.SetNX(ctx, key, []byte("v"), time.Hour)
	_, errs["CompareAndSwap"] = s.CompareAndSwap(ctx, key, []byte("v"), []byte("w"), time.Hour)
	_, errs["CompareAndDelete"] = s.CompareAndDelete(ctx, key, []byte("v"))
	_, errs["Consume"] = s.Consume(ctx, key)
	return errs
}

func TestErrorsIdentifyKeysOnlyByDigest(t *testing.T) {
	ref := wantRef(secretKey)
	ctx := context.Background()

	t.Run("corrupt value", func(t *testing.T) {
		s, db := newHeld(t)
		s.txMu.Unlock()
		rawPut(t, db, secretKey, []byte{9, 9})
		for op, err := range callAll(s, secretKey) {
			require.ErrorIs(t, err, store.ErrCorrupt, op)
			requireRedacted(t, op, err, ref)
		}
		_, err := s.Len(ctx)
		require.ErrorIs(t, err, store.ErrCorrupt)
		requireRedacted(t, "Len", err, ref)
	})

	t.Run("absent key", func(t *testing.T) {
		s, _ := newHeld(t)
		s.txMu.Unlock()
		_, err := s.Get(ctx, secretKey)
		require.ErrorIs(t, err, store.ErrNotFound)
		requireRedacted(t, "Get", err, ref)
		_, err = s.Consume(ctx, secretKey)
		require.ErrorIs(t, err, store.ErrNotFound)
		requireRedacted(t, "Consume", err, ref)
	})

	t.Run("invalid arguments", func(t *testing.T) {
		s, _ := newHeld(t)
		s.txMu.Unlock()
		long := secretKey + strings.Repeat("x", store.MaxKeyLen)
		for what, err := range map[string]error{
			"SetNX nil value": second(s.SetNX(ctx, secretKey, nil, time.Hour)),
			"SetNX zero TTL":  second(s.SetNX(ctx, secretKey, []byte("v"), 0)),
			"SetNX long key":  second(s.SetNX(ctx, long, []byte("v"), time.Hour)),
			"CAS nil old":     errOf(s.CompareAndSwap(ctx, secretKey, nil, []byte("w"), time.Hour)),
			"CAD nil old":     errOf(s.CompareAndDelete(ctx, secretKey, nil)),
			"Get long key":    errOf(s.Get(ctx, long)),
			"Consume long":    errOf(s.Consume(ctx, long)),
		} {
			require.ErrorIs(t, err, store.ErrInvalid, what)
			requireRedacted(t, what, err, "")
		}
	})

	t.Run("closed store", func(t *testing.T) {
		s, _ := newHeld(t)
		s.txMu.Unlock()
		require.NoError(t, s.Close())
		for op, err := range callAll(s, secretKey) {
			require.ErrorIs(t, err, ErrClosed, op)
			requireRedacted(t, op, err, "")
		}
	})

	t.Run("locked file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "locked.db")
		s, err := Open(path)
		require.NoError(t, err)
		defer s.Close()
		_, err = Open(path, WithOpenTimeout(20*time.Millisecond))
		require.ErrorIs(t, err, ErrLocked)
		requireRedacted(t, "Open", err, "")
	})

	t.Run("damaged page", func(t *testing.T) {
		path, lost := damagedFile(t, "leaf", secretKey+"-")
		require.True(t, strings.HasPrefix(lost, secretKey))
		s, err := Open(path, WithoutSweeper())
		require.NoError(t, err)
		defer s.Close()
		for op, err := range callAll(s, lost) {
			require.ErrorIs(t, err, store.ErrCorrupt, op)
			requireRedacted(t, op, err, wantRef(lost))
		}
		_, err = s.Len(ctx)
		requireRedacted(t, "Len", err, "")
		_, err = s.Sweep(ctx)
		requireRedacted(t, "Sweep", err, "")
	})

	t.Run("panic on the direct path", func(t *testing.T) {
		s, _ := newHeld(t)
		s.txMu.Unlock()
		err := s.submit(ctx, "test", secretKey, panicOp().apply)
		require.ErrorIs(t, err, store.ErrCorrupt)
		requireRedacted(t, "submit", err, ref)
	})

	t.Run("panic naming key bytes", func(t *testing.T) {
		// bbolt's "misplaced bucket header" panic prints keys in hex.
		p := fmt.Sprintf("misplaced bucket header: %x -> %x", []byte("b"), []byte(secretKey))
		err := panicError("boltstore: get", secretKey, p)
		require.ErrorIs(t, err, store.ErrCorrupt)
		requireRedacted(t, "panicError", err, ref)
		require.Contains(t, err.Error(), "misplaced bucket header", "the rest of bbolt's message stays")
	})
}

// second returns the error of a SetNX.
func second(_ bool, _ store.Entry, err error) error { return err }

// errOf returns the error of a two-result call.
func errOf[T any](_ T, err error) error { return err }
