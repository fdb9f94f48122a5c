package storetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

// isolationCases check that values are copied in and out.
func isolationCases() []testCase {
	return []testCase{
		{"Isolation/SetNXInput", testIsolationSetNXIn},
		{"Isolation/CompareAndSwapInput", testIsolationCASIn},
		{"Isolation/GetOutput", testIsolationGetOut},
		{"Isolation/SetNXExistingOutput", testIsolationSetNXOut},
		{"Isolation/ConsumeOutput", testIsolationConsumeOut},
	}
}

// scribble overwrites every byte of b.
func scribble(b []byte) {
	for i := range b {
		b[i] = 'X'
	}
}

func testIsolationSetNXIn(t *testing.T, s store.Store) {
	in := []byte("original")
	mustSet(t, s, "k", in, longTTL)
	scribble(in)
	requireValue(t, s, "k", []byte("original"))
}

func testIsolationCASIn(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("v1"), longTTL)
	old, in := []byte("v1"), []byte("replaced")
	swap(t, s, "k", old, in, longTTL)
	scribble(in)
	scribble(old)
	requireValue(t, s, "k", []byte("replaced"))
}

func testIsolationGetOut(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("original"), longTTL)
	e := requireValue(t, s, "k", []byte("original"))
	scribble(e.Value)
	requireValue(t, s, "k", []byte("original"))
}

func testIsolationSetNXOut(t *testing.T, s store.Store) {
	mustSet(t, s, "k", []byte("original"), longTTL)
	set, existing, err := s.SetNX(ctxb, "k", []byte("other"), longTTL)
	require.NoError(t, err)
	require.False(t, set)
	scribble(existing.Value)
	requireValue(t, s, "k", []byte("original"))
}

// testIsolationConsumeOut reads a value from several keys and then
// consumes one: scribbling on the consumed copy changes none of the others
// nor a copy read earlier.
func testIsolationConsumeOut(t *testing.T, s store.Store) {
	want := []byte(strings.Repeat("shared", 4))
	for _, k := range []string{"a", "b"} {
		mustSet(t, s, k, want, longTTL)
	}
	before := requireValue(t, s, "a", want)
	v, err := s.Consume(ctxb, "a")
	require.NoError(t, err)
	scribble(v)
	require.Equal(t, want, before.Value)
	requireValue(t, s, "b", want)
	mustSet(t, s, "a", want, longTTL)
	requireValue(t, s, "a", want)
}
