package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
)

// TestMultiUnknown: a server whose INFO says 7.0 but that does not know
// MULTI (renamed away, or a proxy without transactions) runs the SET NX
// GET and PTTL sent after the refused MULTI one by one, outside any
// transaction. SetNX must then not run again as a script, which would
// find the caller's own value and report its claim as lost: the call
// that wrote may fail, but no call reports set == false for a key it
// stored. Later operations, Get included, run as scripts and work.
func TestMultiUnknown(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "MULTI", "MULTI-b7f3"))
	client := srv.Client(t)

	t.Run("SetNX", func(t *testing.T) {
		s := newStore(t, client)
		set, e, err := s.SetNX(ctxb, "first", []byte("mine"), time.Minute)
		require.False(t, err == nil && !set, "SetNX of an absent key reported the caller's own write as an existing entry %q", e.Value)
		for _, k := range []string{"a", "b"} {
			set, _, err := s.SetNX(ctxb, k, []byte("mine"), time.Minute)
			require.NoError(t, err)
			require.True(t, set, "SetNX(%q) of an absent key", k)
		}
		set, e, err = s.SetNX(ctxb, "a", []byte("other"), time.Minute)
		require.NoError(t, err)
		require.False(t, set)
		require.Equal(t, []byte("mine"), e.Value)
		e, err = s.Get(ctxb, "b")
		require.NoError(t, err)
		require.Equal(t, []byte("mine"), e.Value)
	})
	t.Run("SetNXBatch", func(t *testing.T) {
		s := newStore(t, client)
		items := func(keys ...string) []store.BatchItem {
			var out []store.BatchItem
			for _, k := range keys {
				out = append(out, store.BatchItem{Key: k, Value: []byte("mine"), TTL: time.Minute})
			}
			return out
		}
		res, err := s.SetNXBatch(ctxb, items("x", "y"))
		if err == nil {
			for i, r := range res {
				require.True(t, r.Set, "SetNXBatch item %d of an absent key reported the caller's own write as existing", i)
			}
		}
		res, err = s.SetNXBatch(ctxb, items("p", "q", "p"))
		require.NoError(t, err)
		require.True(t, res[0].Set)
		require.True(t, res[1].Set)
		require.False(t, res[2].Set)
	})
	t.Run("Get", func(t *testing.T) {
		s := newStore(t, client)
		for range 2 {
			_, err := s.Get(ctxb, "absent")
			require.ErrorIs(t, err, store.ErrNotFound)
		}
	})
}
