package storetest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// invalidCases check that every operation rejects arguments the contract
// forbids with ErrInvalid, and changes nothing.
func invalidCases() []testCase {
	return []testCase{
		{"Invalid/SetNX", testInvalidSetNX},
		{"Invalid/Get", testInvalidGet},
		{"Invalid/CompareAndSwap", testInvalidCAS},
		{"Invalid/CompareAndDelete", testInvalidCAD},
		{"Invalid/Consume", testInvalidConsume},
	}
}

// Fixtures for the invalid-input cases: "k" holds "v"; "new" is absent.
var (
	longKey      = strings.Repeat("k", store.MaxKeyLen+1)
	badKeys      = []string{"", longKey}
	badTTLs      = []time.Duration{0, -time.Nanosecond, -time.Hour}
	presentValue = []byte("v")
)

const fixtureTTL = 10 * time.Second

// setupInvalid stores the fixture key "k" and returns a check that the
// store still holds exactly the fixture.
func setupInvalid(t *testing.T, s store.Store) (check func()) {
	mustSet(t, s, "k", presentValue, fixtureTTL)
	return func() {
		t.Helper()
		e := requireValue(t, s, "k", presentValue)
		requireTTLNear(t, e.TTL, fixtureTTL)
		requireAbsent(t, s, "new")
	}
}

func requireInvalid(t *testing.T, err error, call string) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrInvalid, "%s must fail with ErrInvalid", call)
}

func testInvalidSetNX(t *testing.T, s store.Store) {
	check := setupInvalid(t, s)
	oversized := make([]byte, store.MaxValueLen+1)
	type args struct {
		key   string
		value []byte
		ttl   time.Duration
	}
	calls := []args{{"new", nil, time.Hour}, {"k", nil, time.Hour}, {"new", oversized, time.Hour}}
	for _, k := range badKeys {
		calls = append(calls, args{k, []byte("x"), time.Hour})
	}
	for _, ttl := range badTTLs {
		calls = append(calls, args{"new", []byte("x"), ttl}, args{"k", []byte("x"), ttl})
	}
	for _, a := range calls {
		set, _, err := s.SetNX(ctxb, a.key, a.value, a.ttl)
		call := "SetNX(key len " + strconv.Itoa(len(a.key)) + ", ttl " + a.ttl.String() + ")"
		requireInvalid(t, err, call)
		require.False(t, set, call)
	}
	check()
}

func testInvalidGet(t *testing.T, s store.Store) {
	check := setupInvalid(t, s)
	for _, k := range badKeys {
		e, err := s.Get(ctxb, k)
		requireInvalid(t, err, "Get(key len "+strconv.Itoa(len(k))+")")
		require.Nil(t, e.Value)
	}
	check()
}

func testInvalidCAS(t *testing.T, s store.Store) {
	check := setupInvalid(t, s)
	oversized := make([]byte, store.MaxValueLen+1)
	type args struct {
		key      string
		old, new []byte
		ttl      time.Duration
	}
	calls := []args{
		{"k", nil, []byte("x"), time.Hour},
		{"k", presentValue, nil, time.Hour},
		{"k", presentValue, oversized, time.Hour},
		{"new", nil, []byte("x"), time.Hour},
	}
	for _, k := range badKeys {
		calls = append(calls, args{k, presentValue, []byte("x"), time.Hour})
	}
	for _, ttl := range badTTLs {
		calls = append(calls, args{"k", presentValue, []byte("x"), ttl})
	}
	for i, a := range calls {
		ok, err := s.CompareAndSwap(ctxb, a.key, a.old, a.new, a.ttl)
		call := "CompareAndSwap call " + strconv.Itoa(i)
		requireInvalid(t, err, call)
		require.False(t, ok, call)
	}
	check()
}

func testInvalidCAD(t *testing.T, s store.Store) {
	check := setupInvalid(t, s)
	ok, err := s.CompareAndDelete(ctxb, "k", nil)
	requireInvalid(t, err, "CompareAndDelete(nil old)")
	require.False(t, ok)
	for _, k := range badKeys {
		ok, err := s.CompareAndDelete(ctxb, k, presentValue)
		requireInvalid(t, err, "CompareAndDelete(key len "+strconv.Itoa(len(k))+")")
		require.False(t, ok)
	}
	check()
}

func testInvalidConsume(t *testing.T, s store.Store) {
	check := setupInvalid(t, s)
	for _, k := range badKeys {
		v, err := s.Consume(ctxb, k)
		requireInvalid(t, err, "Consume(key len "+strconv.Itoa(len(k))+")")
		require.Nil(t, v)
	}
	check()
}
