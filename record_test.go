package idemkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []record{
		{state: stateInProgress, owner: nonce{1, 2, 3}, created: 1700000000000, updated: 1700000000001, fingerprint: "fp"},
		{state: stateDone, owner: nonce{9}, created: 1, updated: 2, fingerprint: "", payload: []byte("result")},
		{state: stateFailed, created: -5, fingerprint: string(make([]byte, 300)), payload: []byte{}},
		{state: stateSpent},
		{state: stateTooLarge, owner: nonce{7}, created: 3, updated: 4, fingerprint: "fp", payload: sizePayload(1 << 30)},
	} {
		got, err := decodeRecord(r.encode())
		require.NoError(t, err)
		assert.Equal(t, r.state, got.state)
		assert.Equal(t, r.owner, got.owner)
		assert.Equal(t, r.created, got.created)
		assert.Equal(t, r.updated, got.updated)
		assert.Equal(t, r.fingerprint, string(got.fp))
		assert.Equal(t, string(r.payload), string(got.payload))
	}
	got, err := decodeRecord(issuedToken)
	require.NoError(t, err)
	assert.Equal(t, stateIssued, got.state)
}

func TestRecordDecodeRejectsBadInput(t *testing.T) {
	good := (&record{state: stateDone, fingerprint: "abc", payload: []byte("x")}).encode()
	bad := map[string][]byte{
		"nil":             nil,
		"one byte":        {1},
		"version 1":       append([]byte{1}, good[1:]...),
		"version 3":       append([]byte{3}, good[1:]...),
		"version 0":       append([]byte{0}, good[1:]...),
		"state 0":         {recordVersion, 0},
		"state 99":        append([]byte{recordVersion, 99}, good[2:]...),
		"issued too long": {recordVersion, stateIssued, 0},
		"negative tail":   append(append(append([]byte{}, good[:42]...), 0x80, 0, 0, 0, 0, 0, 0, 0), good[50:]...),
		"truncated":       good[:20],
		"header only":     good[:recordHeaderLen],
		"fp too long":     append(append([]byte{}, good[:recordHeaderLen]...), 200, 'a'),
		"bad varint":      append(append([]byte{}, good[:recordHeaderLen]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
	for name, b := range bad {
		_, err := decodeRecord(b)
		assert.ErrorIs(t, err, store.ErrCorrupt, name)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&record{state: stateDone, fingerprint: "abc", payload: []byte("x")}).encode())
	f.Add(issuedToken)
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b) // must never panic
		if err == nil && r.state != stateIssued {
			again, err := decodeRecord((&record{state: r.state, owner: r.owner, created: r.created, updated: r.updated, fingerprint: string(r.fp), payload: r.payload}).encode())
			require.NoError(t, err)
			require.Equal(t, string(r.payload), string(again.payload))
		}
	})
}
