package memstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNodeRemainingRoundsUpToMilliseconds(t *testing.T) {
	n := &node{expires: int64(10 * time.Millisecond)}
	assert.Equal(t, 10*time.Millisecond, n.remaining(0))
	assert.Equal(t, 10*time.Millisecond, n.remaining(1))
	assert.Equal(t, 9*time.Millisecond, n.remaining(int64(time.Millisecond)))
	assert.Equal(t, time.Millisecond, n.remaining(n.expires-1))
}
