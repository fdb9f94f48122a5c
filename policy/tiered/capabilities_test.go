package tiered_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
)

// A tiered store over a primary that batches and scans does too: a batch
// is the primary's while the breaker is closed, and SetNX per item,
// journaled, while the fallback answers; a scan lists the primary's keys
// and the fallback's outage keys.
func TestTieredBatchAndScanFollowThePrimary(t *testing.T) {
	p := newFaulty(t)
	s := mustTiered(t, p, newMem(t), tiered.WithFailureThreshold(1), tiered.WithCoolDown(time.Hour))
	t.Cleanup(func() { _ = s.Close() })
	b, ok := s.Store.(store.Batcher)
	require.True(t, ok)
	sc, ok := s.Store.(store.Scanner)
	require.True(t, ok)
	items := func(keys ...string) []store.BatchItem {
		var it []store.BatchItem
		for _, k := range keys {
			it = append(it, store.BatchItem{Key: k, Value: []byte("v-" + k), TTL: time.Minute})
		}
		return it
	}
	res, err := b.SetNXBatch(ctx, items("a", "b", "a"))
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false}, []bool{res[0].Set, res[1].Set, res[2].Set})

	openBreaker(t, s, p)
	res, err = b.SetNXBatch(ctx, items("c", "c"))
	require.NoError(t, err)
	assert.True(t, res[0].Set)
	assert.False(t, res[1].Set)
	assert.Equal(t, []byte("v-c"), res[1].Existing.Value)
	assert.Equal(t, 1, s.Stats().Journal, "the outage claim is journaled")

	p.Set(healthy)
	seen := map[string]string{}
	require.NoError(t, sc.Scan(ctx, "", func(key string, e store.Entry) bool {
		seen[key] = string(e.Value)
		return true
	}))
	assert.Equal(t, map[string]string{"a": "v-a", "b": "v-b", "c": "v-c"}, seen)
}
