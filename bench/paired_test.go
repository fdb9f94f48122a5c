package bench

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkPaired measures every stack of a scenario, and both one-GET
// floors, in one loop: each op sends one request to each of them in turn,
// so load on a shared machine hits all of them alike. The order changes
// from op to op (pairedOrder) so that each follows every other one equally
// often: a request's latency depends on the one before it. It reports each
// one's median latency as p50us:<stack> (floors as floor-nethttp and
// floor-fiber); benchtable turns them into ratios paired within each pass.
func BenchmarkPaired(b *testing.B) {
	b.Run("FirstExecution", func(b *testing.B) { benchPaired(b, guardedStacks, false) })
	b.Run("Replay", func(b *testing.B) { benchPaired(b, replayStacks, true) })
}

// pairedTarget is one service instance in a paired loop.
type pairedTarget struct {
	name string
	url  string
	next func() string
	lat  []time.Duration
}

func benchPaired(b *testing.B, stacks []stack, replay bool) {
	var ts []*pairedTarget
	for _, f := range floorStacks {
		key := newKey() // ignored by the floor; sent so the request bytes match
		ts = append(ts, &pairedTarget{name: "floor-" + f.name, url: f.oneGET(b, &orders{}), next: func() string { return key }})
	}
	for _, s := range stacks {
		next := newKey
		if replay {
			key := newKey()
			next = func() string { return key }
		}
		ts = append(ts, &pairedTarget{name: s.name, url: s.start(b, &orders{}), next: next})
	}
	c := newHTTPClient(b)
	for _, t := range ts {
		mustPost(b, c, t.url, t.next(), http.StatusCreated) // warm up
	}
	round := 0
	for b.Loop() {
		for _, j := range pairedOrder(round, len(ts)) {
			t := ts[j]
			start := time.Now()
			mustPost(b, c, t.url, t.next(), http.StatusCreated)
			t.lat = append(t.lat, time.Since(start))
		}
		round++
	}
	for _, t := range ts {
		b.ReportMetric(p50(t.lat).Seconds()*1e6, "p50us:"+t.name)
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
