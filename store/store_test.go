package store_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idemkit/store"
)

func TestRoundTTL(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		time.Nanosecond:                  time.Millisecond,
		time.Millisecond:                 time.Millisecond,
		time.Millisecond + 1:             2 * time.Millisecond,
		1500 * time.Microsecond:          2 * time.Millisecond,
		time.Hour:                        time.Hour,
		math.MaxInt64:                    math.MaxInt64 - math.MaxInt64%time.Millisecond,
		math.MaxInt64 - time.Millisecond: math.MaxInt64 - math.MaxInt64%time.Millisecond, // rounded up: still fits
	} {
		got := store.RoundTTL(in)
		assert.Equal(t, want, got, "RoundTTL(%d)", in)
		assert.Positive(t, got)
	}
}

func TestChecks(t *testing.T) {
	long := strings.Repeat("k", store.MaxKeyLen+1)
	for name, err := range map[string]error{
		"empty key":    store.CheckKey(""),
		"long key":     store.CheckKey(long),
		"nil value":    store.CheckValue(nil),
		"huge value":   store.CheckValue(make([]byte, store.MaxValueLen+1)),
		"zero ttl":     store.CheckTTL(0),
		"negative ttl": store.CheckTTL(-time.Second),
		"set":          store.CheckSet("k", []byte("v"), 0),
		"swap nil old": store.CheckSwap("k", nil, []byte("v"), time.Second),
		"swap nil new": store.CheckSwap("k", []byte("v"), nil, time.Second),
		"delete nil":   store.CheckDelete("k", nil),
	} {
		assert.ErrorIs(t, err, store.ErrInvalid, name)
	}
	assert.NoError(t, store.CheckKey(strings.Repeat("k", store.MaxKeyLen)))
	assert.NoError(t, store.CheckSet("k", []byte{}, time.Millisecond))
	assert.NoError(t, store.CheckSwap("k", []byte{}, []byte{}, time.Millisecond))
}

func TestUnavailableKeepsCause(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	err := store.Unavailable("setnx", cause)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.ErrorIs(t, err, cause)
	assert.Contains(t, err.Error(), "setnx")
}

func TestCheckBatchNamesTheInvalidItem(t *testing.T) {
	ok := store.BatchItem{Key: "k", Value: []byte{}, TTL: time.Second}
	if err := store.CheckBatch([]store.BatchItem{ok, ok}); err != nil {
		t.Fatalf("valid batch: %v", err)
	}
	if err := store.CheckBatch(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	bad := []store.BatchItem{ok, {Key: "k2", Value: nil, TTL: time.Second}}
	err := store.CheckBatch(bad)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "item 1") {
		t.Fatalf("store.CheckBatch = %v, want store.ErrInvalid naming item 1", err)
	}
}
