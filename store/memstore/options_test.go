package memstore

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
)

func TestNewConfigDefaults(t *testing.T) {
	c, err := newConfig(nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultCapacity, c.capacity)
	assert.Equal(t, int64(DefaultMaxBytes), c.maxBytes)
	assert.LessOrEqual(t, c.shards, max(16, 4*runtime.GOMAXPROCS(0)))
	assert.GreaterOrEqual(t, c.maxBytes/int64(c.shards), c.largestEntry(store.MaxValueLen),
		"every default shard holds an entry of the largest size")
	assert.Zero(t, c.sweepInterval)
	assert.Nil(t, c.onEvict)
	assert.Zero(t, c.quota)
}

// TestNewRejectsInvalidOptions checks that no option clamps or ignores an
// argument: New fails, naming the option.
func TestNewRejectsInvalidOptions(t *testing.T) {
	scope := func(string) string { return "" }
	for _, tc := range []struct {
		opt  Option
		name string
	}{
		{WithCapacity(0), "WithCapacity(0)"},
		{WithCapacity(-5), "WithCapacity(-5)"},
		{WithMaxBytes(0), "WithMaxBytes(0)"},
		{WithShards(0), "WithShards(0)"},
		{WithShards(maxShards + 1), "WithShards(65537)"},
		{WithSweepInterval(0), "WithSweepInterval(0s)"},
		{WithSweepInterval(-time.Second), "WithSweepInterval(-1s)"},
		{WithOnEvict(nil), "WithOnEvict(nil)"},
		{WithScopeQuota(0, scope), "WithScopeQuota(0)"},
		{WithScopeQuota(1, nil), "WithScopeQuota: the scope function must not be nil"},
		{nil, "option 1 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opt)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Contains(t, err.Error(), tc.name)
			assert.Nil(t, s)
		})
	}
}

// TestNewRejectsOptionsThatDoNotFitTogether checks the settings no shard
// layout can honour: New fails instead of lowering one of them.
func TestNewRejectsOptionsThatDoNotFitTogether(t *testing.T) {
	scope := func(string) string { return "" }
	for name, opts := range map[string][]Option{
		"more shards than entries":      {WithCapacity(10), WithShards(64)},
		"quota over the capacity":       {WithCapacity(10), WithScopeQuota(11, scope)},
		"quota over a shard's capacity": {WithCapacity(100), WithShards(4), WithScopeQuota(26, scope)},
		"shard budget below one entry":  {WithMaxBytes(4 * (store.MaxKeyLen + EntryOverhead - 1)), WithShards(4)},
		"shard budget below a scope":    {WithMaxBytes(store.MaxKeyLen + EntryOverhead), WithShards(1), WithScopeQuota(1, scope)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(opts...)
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
	_, err := New(WithMaxBytes(4*(store.MaxKeyLen+EntryOverhead)), WithShards(4))
	require.NoError(t, err, "a shard budget of exactly one entry with the longest key")
}

// TestDefaultShardsFitQuotaAndLargestEntry checks that the default shard
// count, unlike an explicit one, adapts to the other options.
func TestDefaultShardsFitQuotaAndLargestEntry(t *testing.T) {
	scope := func(string) string { return "" }
	for _, tc := range []struct {
		name      string
		opts      []Option
		maxShards int
	}{
		{"quota", []Option{WithCapacity(10_000), WithScopeQuota(1000, scope)}, 10},
		{"whole capacity quota", []Option{WithCapacity(10), WithScopeQuota(10, scope)}, 1},
		{"byte budget", []Option{WithMaxBytes(64 << 20)}, 3},
		{"small byte budget", []Option{WithMaxBytes(1 << 20)}, 1},
		{"capacity", []Option{WithCapacity(2)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newConfig(tc.opts)
			require.NoError(t, err)
			assert.Positive(t, c.shards)
			assert.LessOrEqual(t, c.shards, tc.maxShards)
		})
	}
}

func TestShareOfSumsToTotal(t *testing.T) {
	for _, tc := range []struct{ total, parts int }{{100, 16}, {7, 4}, {1, 1}, {100_000, 32}, {33, 32}, {10, 3}} {
		sum := 0
		for i := range tc.parts {
			share := shareOf(tc.total, tc.parts, i)
			assert.Positive(t, share)
			assert.LessOrEqual(t, share, tc.total/tc.parts+1)
			sum += share
		}
		assert.Equal(t, tc.total, sum, "%+v", tc)
	}
	assert.Equal(t, int64(DefaultMaxBytes), shareOf(int64(DefaultMaxBytes), 1, 0))
}
