package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamostore"
)

// TestOversizedValue: a value whose item would exceed 400 KB is refused
// with ErrTooLarge (wrapping store.ErrInvalid) when it does not deflate
// below the limit, changing nothing; one that does is kept and compared
// by its hash.
func TestOversizedValue(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()

	big := make([]byte, 500<<10)
	_, _ = rand.Read(big)
	set, _, err := s.SetNX(ctx, "random", big, time.Minute)
	require.False(t, set)
	require.True(t, errors.Is(err, dynamostore.ErrTooLarge), "%v", err)
	require.True(t, errors.Is(err, store.ErrInvalid), "%v", err)
	require.Equal(t, 0, c.total(), "nothing is sent for an item known too large")
	_, err = s.Get(ctx, "random")
	require.True(t, errors.Is(err, store.ErrNotFound), "%v", err)

	// Over the limit as it is, under it deflated.
	text := bytes.Repeat([]byte(`{"order":42,"status":"paid"},`), 40<<10)
	require.Greater(t, len(text), dynamostore.MaxItemSize)
	set, _, err = s.SetNX(ctx, "text", text, time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	set, held, err := s.SetNX(ctx, "text", []byte("x"), time.Minute)
	require.NoError(t, err)
	require.False(t, set)
	require.Equal(t, text, held.Value)

	other := bytes.Clone(text)
	other[len(other)-2] = '!'
	ok, err := s.CompareAndSwap(ctx, "text", other, []byte("no"), time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "a value differing in one byte must not match")
	ok, err = s.CompareAndSwap(ctx, "text", text, big[:100], time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	// A swap to a value too large changes nothing.
	ok, err = s.CompareAndSwap(ctx, "text", big[:100], big, time.Minute)
	require.False(t, ok)
	require.True(t, errors.Is(err, dynamostore.ErrTooLarge), "%v", err)
	e, err := s.Get(ctx, "text")
	require.NoError(t, err)
	require.Equal(t, big[:100], e.Value)
}

// TestOversizedResult: through the engine, a result over DynamoDB's item
// limit leaves a terminal record: the work ran once, and a repeat gets
// ErrResultTooLarge without running it again.
func TestOversizedResult(t *testing.T) {
	s, _ := newStore(t)
	e, err := idemkit.New(s)
	require.NoError(t, err)
	ctx := context.Background()
	big := make([]byte, 600<<10) // under the engine's 1 MiB cap
	_, _ = rand.Read(big)
	runs := 0
	work := func(context.Context) ([]byte, error) { runs++; return big, nil }

	_, err = e.Do(ctx, "order-42", "fp", work)
	require.True(t, errors.Is(err, idemkit.ErrResultTooLarge), "%v", err)
	_, err = e.Do(ctx, "order-42", "fp", work)
	require.True(t, errors.Is(err, idemkit.ErrResultTooLarge), "%v", err)
	require.Equal(t, 1, runs, "the work must not run again")
}
