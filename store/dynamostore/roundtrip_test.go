package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestOneRequestPerOperation counts the HTTP requests of every operation,
// a failed claim included: it gets the item holding the key in the
// answer to its one PutItem.
func TestOneRequestPerOperation(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	one := func(op string) {
		t.Helper()
		require.Equal(t, map[string]int{op: 1}, c.take())
	}

	set, _, err := s.SetNX(ctx, "k", []byte("first"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	one("PutItem")

	set, held, err := s.SetNX(ctx, "k", []byte("second"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, "first", string(held.Value))
	require.Greater(t, held.TTL, 50*time.Second)
	require.LessOrEqual(t, held.TTL, time.Minute)
	one("PutItem")

	set, v, err := s.SetNXValue(ctx, "k", []byte("third"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, "first", string(v))
	one("PutItem")

	e, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "first", string(e.Value))
	one("GetItem")

	ok, err := s.CompareAndSwap(ctx, "k", []byte("other"), []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	one("PutItem")
	ok, err = s.CompareAndSwap(ctx, "k", []byte("first"), []byte("done"), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	one("PutItem")

	ok, err = s.CompareAndDelete(ctx, "k", []byte("first"))
	require.NoError(t, err)
	require.False(t, ok)
	one("DeleteItem")

	v, err = s.Consume(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "done", string(v))
	one("DeleteItem")
	_, err = s.Consume(ctx, "k")
	require.True(t, errors.Is(err, store.ErrNotFound), "%v", err)
	one("DeleteItem")

}
