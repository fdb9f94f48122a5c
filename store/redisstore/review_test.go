package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// wrappedClient is a user's own client type, e.g. one adding metrics.
type wrappedClient struct{ *redis.Client }

// New must reject a typed nil of any client type, not only go-redis's
// own, rather than return a Store that panics on first use.
func TestNewRejectsTypedNilOfAnyType(t *testing.T) {
	var c *wrappedClient
	s, err := redisstore.New(c)
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Nil(t, s)
	if s != nil {
		require.NotPanics(t, func() { _, _, _ = s.SetNX(ctxb, "k", []byte("v"), time.Minute) })
	}
}
