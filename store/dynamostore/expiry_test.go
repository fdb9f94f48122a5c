package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// TestExpiry checks that an item past its expiry is absent for every
// operation while DynamoDB still holds it (its TTL deletion lags; dynalite
// has none), and that a claim takes its place in one request.
func TestExpiry(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	for _, k := range []string{"claim", "get", "swap", "delete", "consume"} {
		set, _, err := s.SetNX(ctx, k, []byte("old"), 30*time.Millisecond)
		require.NoError(t, err)
		require.True(t, set)
	}
	// Poll until every item is seen expired.
	require.Eventually(t, func() bool {
		_, err := s.Get(ctx, "consume") // set last, so expired last
		return errors.Is(err, store.ErrNotFound)
	}, 5*time.Second, 5*time.Millisecond)

	c.reset()
	set, _, err := s.SetNX(ctx, "claim", []byte("new"), time.Minute)
	require.NoError(t, err)
	require.True(t, set, "a claim over an expired item must succeed")
	require.Equal(t, map[string]int{"PutItem": 1}, c.take())
	e, err := s.Get(ctx, "claim")
	require.NoError(t, err)
	require.Equal(t, "new", string(e.Value))

	ok, err := s.CompareAndSwap(ctx, "swap", []byte("old"), []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "an expired item must not be swapped")
	ok, err = s.CompareAndDelete(ctx, "delete", []byte("old"))
	require.NoError(t, err)
	require.False(t, ok, "an expired item must not be deleted as held")
	_, err = s.Consume(ctx, "consume")
	require.True(t, errors.Is(err, store.ErrNotFound), "%v", err)

	seen := 0
	require.NoError(t, s.Scan(ctx, "", func(key string, ent store.Entry) bool {
		seen++
		require.Equal(t, "claim", key)
		return true
	}))
	require.Equal(t, 1, seen, "Scan must list the live key only")
}
