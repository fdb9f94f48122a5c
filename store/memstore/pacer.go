package memstore

// pacer spaces out scans for expired entries so that their cost stays a
// small constant per insert: scans are at least capacity/2 inserts apart,
// an interval that doubles (up to 4*capacity) after each scan that finds
// nothing, as in a list full of live entries, and falls back after one
// that finds something.
type pacer struct {
	since, every, capacity int
}

// Bounds of pacer.every, as fractions and multiples of the capacity.
const (
	scanEveryMinDiv = 2 // at least capacity/2 inserts between scans
	scanEveryMaxMul = 4 // at most 4*capacity inserts between scans
)

// init prepares a pacer for a list of at most capacity entries.
func (p *pacer) init(capacity int) {
	*p = pacer{capacity: capacity}
	p.every = p.minEvery()
}

// minEvery is the shortest interval, in inserts, between two scans.
func (p *pacer) minEvery() int {
	return max(1, p.capacity/scanEveryMinDiv)
}

// due reports whether a scan may run now.
func (p *pacer) due() bool {
	return p.since >= p.every
}

// scanned records a scan that removed found entries.
func (p *pacer) scanned(found int) {
	p.since = 0
	if found > 0 {
		p.every = p.minEvery()
		return
	}
	p.every = min(2*p.every, scanEveryMaxMul*p.capacity)
}
