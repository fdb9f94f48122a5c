package memstore

import (
	"math"
	"time"
)

// node is one entry. value is never modified after it is stored (updates
// store a new slice), so a slice header read under the shard lock may be
// copied from after the lock is released.
type node struct {
	key     string
	value   []byte
	expires int64 // monotonic nanoseconds since the Store's epoch
	seg     uint8 // the segment it is in: probation, protected or claimed
	scope   *scope
	// links chain the node in its scope's list of its segment.
	links link
}

// link is a node's place in one list: prev is towards the most recently
// used end, next towards the least recently used.
type link struct{ prev, next *node }

// live reports whether n has not expired at now.
func (n *node) live(now int64) bool {
	return now < n.expires
}

// remaining returns n's time to live at now, rounded up to a whole
// millisecond. n must be live.
func (n *node) remaining(now int64) time.Duration {
	left := time.Duration(n.expires - now)
	if left > math.MaxInt64-time.Millisecond {
		return left.Truncate(time.Millisecond)
	}
	return (left + time.Millisecond - 1).Truncate(time.Millisecond)
}
