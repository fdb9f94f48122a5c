package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// testCase is one named conformance check, run against a fresh store.
type testCase struct {
	name string
	f    func(t *testing.T, s store.Store)
}

// Run runs the conformance suite as subtests of t. newStore is called once
// per subtest, with that subtest's t, and must return a fresh, empty store;
// it registers its own cleanup (closing the store, say) with t.Cleanup.
// Subtests run sequentially.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	var cases []testCase
	cases = append(cases, opCases()...)
	cases = append(cases, invalidCases()...)
	cases = append(cases, ttlCases()...)
	cases = append(cases, isolationCases()...)
	cases = append(cases, keyCases()...)
	cases = append(cases, raceCases()...)
	cases = append(cases, lockstepCases()...)
	cases = append(cases, ctxCases()...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			require.NotNil(t, s, "newStore returned nil")
			c.f(t, s)
		})
	}
}

// longTTL is a TTL no subtest outlives.
const longTTL = 10 * time.Minute

// ctxb is the context for operations that are not about contexts.
var ctxb = context.Background()

// mustSet stores value under an absent key, failing the test otherwise.
func mustSet(t *testing.T, s store.Store, key string, value []byte, ttl time.Duration) {
	t.Helper()
	set, _, err := s.SetNX(ctxb, key, value, ttl)
	require.NoError(t, err, "SetNX(%q)", key)
	require.True(t, set, "SetNX(%q) on an absent key did not set", key)
}

// requireValue asserts that key holds want and returns its entry.
func requireValue(t *testing.T, s store.Store, key string, want []byte) store.Entry {
	t.Helper()
	e, err := s.Get(ctxb, key)
	require.NoError(t, err, "Get(%q)", key)
	require.NotNil(t, e.Value, "Get(%q) returned a nil value", key)
	require.Equal(t, want, e.Value, "Get(%q)", key)
	requireValidTTL(t, e.TTL)
	return e
}

// requireAbsent asserts that Get reports key as not found.
func requireAbsent(t *testing.T, s store.Store, key string) {
	t.Helper()
	e, err := s.Get(ctxb, key)
	require.ErrorIs(t, err, store.ErrNotFound, "Get(%q) of an absent key", key)
	require.Nil(t, e.Value, "Get(%q) of an absent key returned a value", key)
}

// requireValidTTL asserts the contract's rules for a reported TTL: positive
// and a whole number of milliseconds.
func requireValidTTL(t *testing.T, ttl time.Duration) {
	t.Helper()
	require.Positive(t, ttl, "reported TTL must be positive")
	require.Zero(t, ttl%time.Millisecond, "reported TTL %v is not a whole number of milliseconds", ttl)
}

// requireTTLNear asserts a reported TTL in (want-1s, want].
func requireTTLNear(t *testing.T, got, want time.Duration) {
	t.Helper()
	requireValidTTL(t, got)
	require.LessOrEqual(t, got, want, "reported TTL exceeds the TTL set")
	require.Greater(t, got, want-time.Second, "reported TTL %v is far below the %v set", got, want)
}
