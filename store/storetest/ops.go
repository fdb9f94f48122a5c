package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// opCases check the semantics of each operation on live keys.
func opCases() []testCase {
	return []testCase{
		{"SetNX/SetsWhenAbsent", testSetNXAbsent},
		{"SetNX/ReturnsExistingWhenPresent", testSetNXPresent},
		{"SetNX/EmptyValue", testSetNXEmptyValue},
		{"SetNX/MaxSizes", testSetNXMaxSizes},
		{"Get/Absent", testGetAbsent},
		{"CompareAndSwap/Absent", testCASAbsent},
		{"CompareAndSwap/Mismatch", testCASMismatch},
		{"CompareAndSwap/Match", testCASMatch},
		{"CompareAndSwap/EmptyValues", testCASEmpty},
		{"CompareAndDelete/Absent", testCADAbsent},
		{"CompareAndDelete/Mismatch", testCADMismatch},
		{"CompareAndDelete/Match", testCADMatch},
		{"Consume/Absent", testConsumeAbsent},
		{"Consume/Present", testConsumePresent},
		{"Consume/EmptyValue", testConsumeEmpty},
	}
}

func testSetNXAbsent(t *testing.T, s store.Store) {
	set, _, err := s.SetNX(ctxb, "k", []byte("v1"), 10*time.Second)
	require.NoError(t, err)
	require.True(t, set)
	e := requireValue(t, s, "k", []byte("v1"))
	requireTTLNear(t, e.TTL, 10*time.Second)
}

func testSetNXPresent(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("first"), 10*time.Second)
	set, existing, err := s.SetNX(ctxb, "k", []byte("second"), time.Hour)
	require.NoError(t, err)
	require.False(t, set, "SetNX on a present key must not set")
	require.Equal(t, []byte("first"), existing.Value)
	requireTTLNear(t, existing.TTL, 10*time.Second)
	e := requireValue(t, s, "k", []byte("first"))
	requireTTLNear(t, e.TTL, 10*time.Second)
}

func testSetNXEmptyValue(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte{}, longTTL)
	requireValue(t, s, "k", []byte{})
	set, existing, err := s.SetNX(ctxb, "k", []byte("other"), longTTL)
	require.NoError(t, err)
	require.False(t, set, "an empty value is present, not absent")
	require.NotNil(t, existing.Value, "existing empty value returned as nil")
	require.Empty(t, existing.Value)
	requireValidTTL(t, existing.TTL)
}

func testSetNXMaxSizes(t *testing.T, s store.Store) {
	key := string(make([]byte, store.MaxKeyLen))
	value := make([]byte, store.MaxValueLen)
	value[0], value[len(value)-1] = 1, 2
	mustSet(t, s, key, value, longTTL)
	requireValue(t, s, key, value)
}

func testGetAbsent(t *testing.T, s store.Store) {
	requireAbsent(t, s, "missing")
}

func testCASAbsent(t *testing.T, s store.Store) {
	ok, err := s.CompareAndSwap(ctxb, "k", []byte("a"), []byte("b"), longTTL)
	require.NoError(t, err)
	require.False(t, ok, "CompareAndSwap on an absent key must report false")
	requireAbsent(t, s, "k")
}

func testCASMismatch(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("abc"), 10*time.Second)
	for _, old := range [][]byte{[]byte("abd"), []byte("ab"), []byte("abcd"), []byte("ABC"), {}} {
		ok, err := s.CompareAndSwap(ctxb, "k", old, []byte("new"), time.Hour)
		require.NoError(t, err)
		require.False(t, ok, "CompareAndSwap with old %q must not match %q", old, "abc")
	}
	e := requireValue(t, s, "k", []byte("abc"))
	requireTTLNear(t, e.TTL, 10*time.Second)
}

func testCASMatch(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("v1"), 10*time.Second)
	ok, err := s.CompareAndSwap(ctxb, "k", []byte("v1"), []byte("v2"), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	e := requireValue(t, s, "k", []byte("v2"))
	requireTTLNear(t, e.TTL, time.Hour)

	ok, err = s.CompareAndSwap(ctxb, "k", []byte("v2"), []byte("v3"), 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	e = requireValue(t, s, "k", []byte("v3"))
	requireTTLNear(t, e.TTL, 5*time.Second)

	ok, err = s.CompareAndSwap(ctxb, "k", []byte("v3"), []byte("v3"), 20*time.Second)
	require.NoError(t, err)
	require.True(t, ok, "same-value CompareAndSwap extends the lease")
	e = requireValue(t, s, "k", []byte("v3"))
	requireTTLNear(t, e.TTL, 20*time.Second)
}

func testCASEmpty(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte{}, longTTL)
	ok, err := s.CompareAndSwap(ctxb, "k", []byte{}, []byte("x"), longTTL)
	require.NoError(t, err)
	require.True(t, ok, "an empty old value matches a stored empty value")
	requireValue(t, s, "k", []byte("x"))

	ok, err = s.CompareAndSwap(ctxb, "k", []byte("x"), []byte{}, longTTL)
	require.NoError(t, err)
	require.True(t, ok)
	requireValue(t, s, "k", []byte{})
}

func testCADAbsent(t *testing.T, s store.Store) {
	ok, err := s.CompareAndDelete(ctxb, "k", []byte("a"))
	require.NoError(t, err)
	require.False(t, ok, "CompareAndDelete on an absent key must report false")
}

func testCADMismatch(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("abc"), longTTL)
	for _, old := range [][]byte{[]byte("abd"), []byte("ab"), []byte("abcd"), {}} {
		ok, err := s.CompareAndDelete(ctxb, "k", old)
		require.NoError(t, err)
		require.False(t, ok, "CompareAndDelete with old %q must not match %q", old, "abc")
	}
	requireValue(t, s, "k", []byte("abc"))
}

func testCADMatch(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("abc"), longTTL)
	mustSet(t, s, "e", []byte{}, longTTL)
	for key, old := range map[string][]byte{"k": []byte("abc"), "e": {}} {
		ok, err := s.CompareAndDelete(ctxb, key, old)
		require.NoError(t, err)
		require.True(t, ok, "CompareAndDelete(%q, %q)", key, old)
		requireAbsent(t, s, key)
		ok, err = s.CompareAndDelete(ctxb, key, old)
		require.NoError(t, err)
		require.False(t, ok, "second CompareAndDelete(%q) must report false", key)
	}
	mustSet(t, s, "k", []byte("again"), longTTL)
}

func testConsumeAbsent(t *testing.T, s store.Store) {
	v, err := s.Consume(ctxb, "k")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Nil(t, v)
}

func testConsumePresent(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("token"), longTTL)
	v, err := s.Consume(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("token"), v)
	requireAbsent(t, s, "k")
	_, err = s.Consume(ctxb, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "second Consume must report not found")
	mustSet(t, s, "k", []byte("again"), longTTL)
}

func testConsumeEmpty(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte{}, longTTL)
	v, err := s.Consume(ctxb, "k")
	require.NoError(t, err)
	require.NotNil(t, v, "a consumed empty value is returned as nil")
	require.Empty(t, v)
	requireAbsent(t, s, "k")
}
