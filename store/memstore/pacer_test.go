package memstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPacerBacksOffAndResets checks the cost bound of the scans for
// expired entries: the interval between scans starts at capacity/2,
// doubles after each scan that finds nothing, up to 4*capacity, and falls
// back to capacity/2 after one that finds something.
func TestPacerBacksOffAndResets(t *testing.T) {
	const capacity = 8
	var p pacer
	p.init(capacity)
	assert.Equal(t, capacity/2, p.every)
	for range 10 {
		p.since = p.every
		assert.True(t, p.due())
		p.scanned(0)
		assert.False(t, p.due())
	}
	assert.Equal(t, 4*capacity, p.every, "interval after scans that found nothing")
	p.scanned(3)
	assert.Equal(t, capacity/2, p.every, "interval after a scan that reclaimed")

	p.init(1)
	assert.Equal(t, 1, p.every, "a one-entry list may scan on every insert")
}
