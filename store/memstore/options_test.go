package memstore

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNewConfigDefaults(t *testing.T) {
	c := newConfig(nil)
	assert.Equal(t, DefaultCapacity, c.capacity)
	assert.Equal(t, ceilPow2(max(16, 4*runtime.GOMAXPROCS(0))), c.shards)
	assert.Zero(t, c.sweepInterval)
	assert.Nil(t, c.onEvict)
}

func TestNewConfigClamps(t *testing.T) {
	cases := []struct {
		name                     string
		opts                     []Option
		wantCapacity, wantShards int
	}{
		{"non-positive capacity", []Option{WithCapacity(-5), WithShards(8)}, DefaultCapacity, 8},
		{"shards rounded up", []Option{WithShards(5)}, DefaultCapacity, 8},
		{"shards capped", []Option{WithShards(1 << 40)}, DefaultCapacity, maxShards},
		{"shards lowered to capacity", []Option{WithCapacity(10), WithShards(64)}, 10, 8},
		{"single entry", []Option{WithCapacity(1)}, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig(tc.opts)
			assert.Equal(t, tc.wantCapacity, c.capacity)
			assert.Equal(t, tc.wantShards, c.shards)
		})
	}
}

func TestShareOfSumsToCapacity(t *testing.T) {
	for _, tc := range []struct{ capacity, shards int }{{100, 16}, {7, 4}, {1, 1}, {100_000, 32}, {33, 32}} {
		sum := 0
		for i := range tc.shards {
			share := shareOf(tc.capacity, tc.shards, i)
			assert.Positive(t, share)
			sum += share
		}
		assert.Equal(t, tc.capacity, sum, "%+v", tc)
	}
}

func TestCeilPow2(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 16: 16, 17: 32, maxShards: maxShards} {
		assert.Equal(t, want, ceilPow2(n), "ceilPow2(%d)", n)
	}
}

func TestRemaining(t *testing.T) {
	e := entry{expires: int64(10 * time.Millisecond)}
	assert.Equal(t, 10*time.Millisecond, e.remaining(0))
	assert.Equal(t, 10*time.Millisecond, e.remaining(1))
	assert.Equal(t, 9*time.Millisecond, e.remaining(int64(time.Millisecond)))
	assert.Equal(t, time.Millisecond, e.remaining(e.expires-1))
}
