package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// Short TTLs for expiry tests: entries set with shortTTL are gone after
// expirySleep, which leaves ample slack for a slow setup.
const (
	shortTTL    = 150 * time.Millisecond
	expirySleep = 300 * time.Millisecond
)

// ttlCases check expiry and remaining-TTL reporting.
func ttlCases() []testCase {
	return []testCase{
		{"TTL/ExpiredIsAbsentForEveryOp", testExpiry},
		{"TTL/SubMillisecondRoundsUp", testSubMillisecond},
		{"TTL/Reporting", testTTLReporting},
	}
}

func testExpiry(t *testing.T, s store.Store) {
	v := []byte("v")
	// "extend" is extended right after it is set, so that a slow remote
	// store has all of shortTTL to make the second call.
	mustSet(t, s, "extend", v, shortTTL)
	swap(t, s, "extend", v, v, longTTL)
	for _, k := range []string{"get", "consume", "cas", "cad", "nx"} {
		mustSet(t, s, k, v, shortTTL)
	}
	mustSet(t, s, "shorten", v, longTTL)
	mustSet(t, s, "live", v, 10*time.Second)
	swap(t, s, "shorten", v, v, shortTTL)

	time.Sleep(expirySleep)

	requireAbsent(t, s, "get")
	_, err := s.Consume(ctxb, "consume")
	require.ErrorIs(t, err, store.ErrNotFound, "Consume of an expired key")
	ok, err := s.CompareAndSwap(ctxb, "cas", v, []byte("w"), longTTL)
	require.NoError(t, err)
	require.False(t, ok, "CompareAndSwap must treat an expired key as absent")
	requireAbsent(t, s, "cas")
	ok, err = s.CompareAndDelete(ctxb, "cad", v)
	require.NoError(t, err)
	require.False(t, ok, "CompareAndDelete must treat an expired key as absent")

	set, _, err := s.SetNX(ctxb, "nx", []byte("fresh"), 10*time.Second)
	require.NoError(t, err)
	require.True(t, set, "SetNX must treat an expired key as absent")
	e := requireValue(t, s, "nx", []byte("fresh"))
	requireTTLNear(t, e.TTL, 10*time.Second)

	requireAbsent(t, s, "shorten")
	requireValue(t, s, "extend", v)
	e = requireValue(t, s, "live", v)
	require.LessOrEqual(t, e.TTL, 10*time.Second-expirySleep, "remaining TTL must count down")
}

// swap performs a CompareAndSwap that must succeed.
func swap(t *testing.T, s store.Store, key string, old, new []byte, ttl time.Duration) {
	t.Helper()
	ok, err := s.CompareAndSwap(ctxb, key, old, new, ttl)
	require.NoError(t, err, "CompareAndSwap(%q)", key)
	require.True(t, ok, "CompareAndSwap(%q)", key)
}

func testSubMillisecond(t *testing.T, s store.Store) {
	ttls := map[string]time.Duration{"ns": time.Nanosecond, "us": 999 * time.Microsecond, "frac": 1500 * time.Microsecond}
	for k, ttl := range ttls {
		set, _, err := s.SetNX(ctxb, k, []byte("v"), ttl)
		require.NoError(t, err, "a sub-millisecond TTL is rounded up, not rejected")
		require.True(t, set)
		if e, err := s.Get(ctxb, k); err == nil {
			requireValidTTL(t, e.TTL)
			require.LessOrEqual(t, e.TTL, store.RoundTTL(ttl))
		} else {
			require.ErrorIs(t, err, store.ErrNotFound)
		}
	}
	mustSet(t, s, "cas", []byte("v"), longTTL)
	ok, err := s.CompareAndSwap(ctxb, "cas", []byte("v"), []byte("w"), time.Nanosecond)
	require.NoError(t, err, "a sub-millisecond TTL is rounded up, not rejected")
	require.True(t, ok)

	time.Sleep(20 * time.Millisecond)
	for k := range ttls {
		requireAbsent(t, s, k)
	}
	requireAbsent(t, s, "cas")
}

func testTTLReporting(t *testing.T, s store.Store) {
	ttls := map[string]time.Duration{
		"whole":   10 * time.Second,
		"frac":    10*time.Second + time.Nanosecond,
		"century": 100 * 365 * 24 * time.Hour,
	}
	for k, ttl := range ttls {
		mustSet(t, s, k, []byte(k), ttl)
		e := requireValue(t, s, k, []byte(k))
		requireTTLNear(t, e.TTL, store.RoundTTL(ttl))
		set, existing, err := s.SetNX(ctxb, k, []byte("other"), time.Second)
		require.NoError(t, err)
		require.False(t, set)
		requireTTLNear(t, existing.TTL, store.RoundTTL(ttl))
	}
	swap(t, s, "century", []byte("century"), []byte("c2"), 3*time.Second)
	e := requireValue(t, s, "century", []byte("c2"))
	requireTTLNear(t, e.TTL, 3*time.Second)
}
