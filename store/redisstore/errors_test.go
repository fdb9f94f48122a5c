package redisstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store/redisstore"
)

// secretKey looks like a credential: no error may print it, or any part
// of the value stored under it.
const (
	secretKey   = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	secretValue = "tok_9f8e7d6c5b4a"
)

// requireRedacted checks that err names neither the secret key nor the
// secret value, and identifies the key by the digest the package
// documents: the first 12 hex digits of the SHA-256 of the Redis key.
func requireRedacted(t *testing.T, what string, err error, redisKey string) {
	t.Helper()
	require.Error(t, err, what)
	msg := err.Error()
	for _, secret := range []string{secretKey, secretValue, secretKey[:12], secretKey[len(secretKey)-12:]} {
		require.NotContains(t, msg, secret, "%s: %v", what, err)
	}
	sum := sha256.Sum256([]byte(redisKey))
	require.Contains(t, msg, "key "+hex.EncodeToString(sum[:6]), "%s: %v", what, err)
}

// TestErrorsNameNoKey drives every error path that concerns one key with
// a secret-looking key and checks the error text.
func TestErrorsNameNoKey(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	prefix := freshPrefix()
	s, err := redisstore.New(client, redisstore.WithPrefix(prefix))
	require.NoError(t, err)
	rk := prefix + secretKey
	v := []byte(secretValue)

	t.Run("not replicated", func(t *testing.T) {
		w, err := redisstore.New(client, redisstore.WithPrefix(prefix), redisstore.WithWaitReplicas(1, time.Millisecond))
		require.NoError(t, err)
		set, _, err := w.SetNX(ctxb, secretKey, v, time.Minute)
		require.True(t, set)
		requireRedacted(t, "SetNX", err, rk)
		ok, err := w.CompareAndSwap(ctxb, secretKey, v, v, time.Minute)
		require.True(t, ok)
		requireRedacted(t, "CompareAndSwap", err, rk)
		ok, err = w.CompareAndDelete(ctxb, secretKey, v)
		require.True(t, ok)
		requireRedacted(t, "CompareAndDelete", err, rk)
		_, _, _ = w.SetNX(ctxb, secretKey, v, time.Minute)
		_, err = w.Consume(ctxb, secretKey)
		requireRedacted(t, "Consume", err, rk)
	})

	t.Run("no expiry", func(t *testing.T) {
		require.NoError(t, client.Set(ctxb, rk, secretValue, 0).Err())
		t.Cleanup(func() { client.Del(ctxb, rk) })
		_, err := s.Get(ctxb, secretKey)
		requireRedacted(t, "Get", err, rk)
		_, _, err = s.SetNX(ctxb, secretKey, v, time.Minute)
		requireRedacted(t, "SetNX", err, rk)
	})

	t.Run("wrong type", func(t *testing.T) {
		require.NoError(t, client.HSet(ctxb, rk, "f", secretValue).Err())
		t.Cleanup(func() { client.Del(ctxb, rk) })
		for _, op := range keyOps(s, secretKey, v) {
			requireRedacted(t, op.name, op.run(), rk)
		}
	})

	t.Run("refused", func(t *testing.T) {
		// A user that may not touch the key: NOPERM, an error reply that
		// is neither an outage nor corruption.
		require.NoError(t, client.Do(ctxb, "ACL", "SETUSER", "limited", "on", ">secret-pw", "+@all", "resetkeys", "~other:*").Err())
		opts := srv.Options()
		opts.Username, opts.Password = "limited", "secret-pw"
		limited := redis.NewClient(opts)
		t.Cleanup(func() { _ = limited.Close() })
		ls, err := redisstore.New(limited, redisstore.WithPrefix(prefix))
		require.NoError(t, err)
		for _, op := range keyOps(ls, secretKey, v) {
			err := op.run()
			require.Error(t, err, op.name)
			require.True(t, strings.Contains(err.Error(), "NOPERM"), "%s: %v", op.name, err)
			requireRedacted(t, op.name, err, rk)
		}
	})
}

// keyOps returns every operation of s on key, each returning its error.
func keyOps(s *redisstore.Store, key string, v []byte) []struct {
	name string
	run  func() error
} {
	return []struct {
		name string
		run  func() error
	}{
		{"SetNX", func() error { _, _, err := s.SetNX(ctxb, key, v, time.Minute); return err }},
		{"Get", func() error { _, err := s.Get(ctxb, key); return err }},
		{"CompareAndSwap", func() error { _, err := s.CompareAndSwap(ctxb, key, v, v, time.Minute); return err }},
		{"CompareAndDelete", func() error { _, err := s.CompareAndDelete(ctxb, key, v); return err }},
		{"Consume", func() error { _, err := s.Consume(ctxb, key); return err }},
	}
}
