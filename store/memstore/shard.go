package memstore

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/internal/layout"
)

// shard is one independently locked part of a Store: a map of nodes, a
// segmented LRU per scope over them, and a heap of the scopes by their
// evictable entries. Every field but mu is guarded by
// mu. The padding keeps neighbouring shards' locks on separate cache
// lines.
type shard struct {
	mu         sync.Mutex
	nodes      map[string]*node
	claims     int // nodes in the claimed segment
	pacer      pacer
	scopes     map[string]*scope
	ranked     scopeHeap // the scopes, most evictable entries first
	spare      *scope    // a dropped scope's bookkeeping, for the next
	none       *scope    // the scope of the keys without one, never dropped
	quota      int       // entries per scope; 0 for none
	maxEntries int
	maxBytes   int64
	bytes      int64 // counted as entryCost and scopeCost say
	// What a shard emptied of every evictable entry would still count:
	// its claims in progress and the scopes holding them.
	claimBytes      int64
	claimScopeBytes int64
	_               [64]byte
}

// scope is the bookkeeping of one scope's entries in a shard; it exists
// while the scope holds at least one entry.
type scope struct {
	name  string
	cost  int64 // scopeCost(name)
	segs  segments
	pacer pacer
	rank  int // index in the shard's heap
}

// init prepares an empty shard holding at most maxEntries (>= 1) entries
// and maxBytes bytes, and at most quota entries per scope if quota > 0.
func (sh *shard) init(maxEntries int, maxBytes int64, quota int) {
	sh.nodes = make(map[string]*node)
	sh.claims = 0
	sh.pacer.init(maxEntries)
	sh.maxEntries, sh.maxBytes, sh.quota = maxEntries, maxBytes, quota
	sh.scopes = make(map[string]*scope)
	sh.ranked, sh.spare = nil, nil
	sh.bytes, sh.claimBytes, sh.claimScopeBytes = 0, 0, 0
	sh.none = sh.newScope("")
}

// entryCost is what an entry counts against the byte budget.
func entryCost(key string, value []byte) int64 {
	return int64(len(key)+len(value)) + EntryOverhead
}

// scopeCost is what a scope's bookkeeping counts against the byte budget:
// nothing for the keys without a scope, which share one.
func scopeCost(name string) int64 {
	if name == "" {
		return 0
	}
	return int64(len(name)) + scopeOverhead
}

// segmentOf returns the segment a value enters: claimed for a claim in
// progress, otherwise probation for a new entry (SetNX) and protected for
// a rewritten one (CompareAndSwap).
func segmentOf(value []byte, rewritten bool) uint8 {
	switch {
	case layout.InProgress(value):
		return claimed
	case rewritten:
		return protected
	}
	return probation
}

// get returns key's node if it is live at now, marking it recently used.
// An expired node is removed. The caller holds mu.
func (sh *shard) get(key string, now int64) *node {
	n := sh.peek(key, now)
	if n != nil {
		sh.touch(n)
	}
	return n
}

// peek is get without marking the node recently used. The caller holds mu.
func (sh *shard) peek(key string, now int64) *node {
	n := sh.nodes[key]
	if n != nil && !n.live(now) {
		sh.drop(n)
		return nil
	}
	return n
}

// touch marks n most recently used in its scope's segment. The caller
// holds mu.
func (sh *shard) touch(n *node) {
	n.scope.segs.of(n).moveToFront(n)
}

// link puts n, most recently used, in its scope's list of its segment,
// and counts it. The caller holds mu.
func (sh *shard) link(n *node) {
	sc := n.scope
	sc.segs.of(n).pushFront(n)
	if n.seg != claimed {
		sh.ranked.fix(sc)
		return
	}
	sh.claims++
	sh.claimBytes += entryCost(n.key, n.value)
	if sc.segs[claimed].len == 1 {
		sh.claimScopeBytes += sc.cost
	}
}

// unlink is the reverse of link. The caller holds mu.
func (sh *shard) unlink(n *node) {
	sc := n.scope
	sc.segs.of(n).remove(n)
	if n.seg != claimed {
		sh.ranked.fix(sc)
		return
	}
	sh.claims--
	sh.claimBytes -= entryCost(n.key, n.value)
	if sc.segs[claimed].len == 0 {
		sh.claimScopeBytes -= sc.cost
	}
}

// drop removes n, and its scope if n was the scope's last entry (but for
// the scope of keys without one, kept for the shard's life), keeping the
// scope's bookkeeping as a spare for the next. The caller holds mu.
func (sh *shard) drop(n *node) {
	delete(sh.nodes, n.key)
	sh.unlink(n)
	sh.bytes -= entryCost(n.key, n.value)
	if sc := n.scope; sc.segs.len() == 0 && sc.name != "" {
		delete(sh.scopes, sc.name)
		sh.ranked.remove(sc)
		sh.bytes -= sc.cost
		sh.spare = sc
	}
}

// insert adds key, which must be absent, in scopeName ("" for none),
// making room first as the package doc's "Eviction" section says. value
// must be the caller's own copy. It appends the keys of the live entries
// it evicted to evicted. It fails with ErrTooLarge if the entry alone
// exceeds the shard's byte budget, and with ErrFull if room could be made
// only by evicting a claim in progress, changing nothing. The caller holds
// mu.
func (sh *shard) insert(key, scopeName string, value []byte, expires, now int64, evicted []string) ([]string, error) {
	cost := entryCost(key, value)
	if cost+scopeCost(scopeName) > sh.maxBytes {
		return evicted, errTooLarge(cost, sh.maxBytes)
	}
	seg := segmentOf(value, false)
	sc := sh.lookup(scopeName)
	over := sh.overBy(cost, sc, scopeName)
	if over {
		if !sh.canFit(1, cost, scopeName, nil, now) {
			return evicted, errFull // before any eviction, the quota's included
		}
		sc = sh.lookup(scopeName) // a scan for expired entries may have dropped it
	}
	if sh.quota > 0 && sc != nil && scopeName != "" && sc.segs.len() >= sh.quota {
		var err error
		if evicted, err = sh.keepQuota(sc, now, evicted); err != nil {
			return evicted, err
		}
		sc = sh.lookup(scopeName) // the quota's eviction may have dropped it
		over = sh.overBy(cost, sc, scopeName)
	}
	if over {
		for sh.overBy(cost, sc, scopeName) {
			var ok bool
			if evicted, ok = sh.makeRoom(nil, now, evicted); !ok {
				return evicted, errFull // not reached: canFit said there was room
			}
			sc = sh.lookup(scopeName) // making room may have dropped it
		}
	}
	if sc == nil {
		sc = sh.newScope(scopeName)
	}
	n := &node{key: key, value: value, expires: expires, seg: seg, scope: sc}
	sh.nodes[key] = n
	sh.link(n)
	sh.bytes += cost
	sh.pacer.since++
	n.scope.pacer.since++
	return evicted, nil
}

// keepQuota frees one entry of sc, which holds its quota, as the package
// doc's "Scopes" section says, or fails with ErrFull if every entry of
// the scope is a live claim in progress. The caller holds mu.
func (sh *shard) keepQuota(sc *scope, now int64, evicted []string) ([]string, error) {
	for sc.segs.len() >= sh.quota {
		if n := expiredTail(&sc.segs, nil, now); n != nil {
			sh.drop(n)
			continue
		}
		if sc.pacer.due() {
			found := sh.removeExpired(&sc.segs, nil, now)
			sc.pacer.scanned(found)
			if found > 0 {
				continue
			}
		}
		n := lruEvictable(&sc.segs, nil)
		if n == nil {
			sc.pacer.since++ // a refusal paces the scans as an insert does
			return evicted, errScopeFull
		}
		sh.drop(n)
		evicted = append(evicted, n.key)
	}
	return evicted, nil
}

// overBy reports whether adding an entry of cost bytes in scopeName, whose
// bookkeeping is sc (nil if it has none yet), would take the shard over
// its entry count or byte budget. The caller holds mu.
func (sh *shard) overBy(cost int64, sc *scope, scopeName string) bool {
	if sc == nil {
		cost += scopeCost(scopeName)
	}
	return len(sh.nodes) >= sh.maxEntries || sh.bytes+cost > sh.maxBytes
}

// lookup returns the bookkeeping of scope name, or nil if it has none.
// The caller holds mu.
func (sh *shard) lookup(name string) *scope {
	if name == "" {
		return sh.none
	}
	return sh.scopes[name]
}

// canFit reports whether evicting every evictable entry but except would
// leave room for entries more entries and cost more bytes in scopeName,
// or, with except, for except grown to cost bytes. When it would not, and
// a scan for expired entries is due, it scans and checks again. The
// caller holds mu.
func (sh *shard) canFit(entries int, cost int64, scopeName string, except *node, now int64) bool {
	for {
		claims, kept := sh.claims, sh.claimBytes+sh.claimScopeBytes+cost
		if except != nil {
			if except.seg == claimed {
				claims--
				kept -= entryCost(except.key, except.value)
			}
			kept += except.scope.cost // except's scope stays (counted twice at worst)
		} else if sc := sh.lookup(scopeName); sc == nil || sc.segs[claimed].len == 0 {
			kept += scopeCost(scopeName)
		}
		if claims+entries <= sh.maxEntries && kept <= sh.maxBytes {
			return true
		}
		if !sh.pacer.due() {
			sh.pacer.since++ // a refusal paces the scans as an insert does
			return false
		}
		found := sh.removeAllExpired(except, now)
		sh.pacer.scanned(found)
		if found == 0 {
			return false
		}
	}
}

// newScope creates the bookkeeping of scope name, which has none. The
// caller holds mu.
func (sh *shard) newScope(name string) *scope {
	// A copy, so that the scope does not keep alive the key it was cut
	// from, which may be evicted long before the scope ends.
	name = strings.Clone(name)
	sc := sh.spare
	if sc != nil {
		sh.spare = nil
		*sc = scope{name: name, cost: scopeCost(name)}
	} else {
		sc = &scope{name: name, cost: scopeCost(name)}
	}
	sc.segs.init()
	sc.pacer.init(max(sh.quota, 1))
	sh.scopes[name] = sc
	sh.ranked.push(sc)
	sh.bytes += sc.cost
	return sc
}

// rewrite replaces n's value with value (the caller's own copy) and its
// expiry, moves n to the protected segment (or keeps it in claimed if
// value is a claim in progress), and makes room for any growth as insert
// does, never evicting n. It fails with ErrTooLarge if n alone would
// exceed the shard's byte budget, and with ErrFull if room could be made
// only by evicting a claim in progress, changing nothing. The caller holds
// mu.
func (sh *shard) rewrite(n *node, value []byte, expires, now int64, evicted []string) ([]string, error) {
	cost := entryCost(n.key, value)
	if cost+n.scope.cost > sh.maxBytes {
		return evicted, errTooLarge(cost, sh.maxBytes)
	}
	growth := cost - entryCost(n.key, n.value)
	if sh.bytes+growth > sh.maxBytes && !sh.canFit(0, cost, n.scope.name, n, now) {
		return evicted, errFull
	}
	sh.unlink(n)
	sh.bytes += growth
	n.value, n.expires, n.seg = value, expires, segmentOf(value, true)
	sh.link(n)
	for sh.bytes > sh.maxBytes {
		var ok bool
		if evicted, ok = sh.makeRoom(n, now, evicted); !ok {
			break // not reached: canFit said there was room
		}
	}
	return evicted, nil
}

// makeRoom removes at least one node other than except, preferring
// expired nodes to live ones: the least recently used node of a segment
// of the fullest scope (the heap's top) if it has expired; otherwise every
// expired node, found by a scan of the shard if its pacer says one is
// due; and only if there is none, the least recently used evictable node
// (probation before protected) of the scope holding the most evictable
// nodes. It appends the key of the live node it evicted, if any, to
// evicted, and reports false if nothing but claims in progress and except
// is left. The caller holds mu.
func (sh *shard) makeRoom(except *node, now int64, evicted []string) ([]string, bool) {
	if len(sh.ranked) > 0 {
		if n := expiredTail(&sh.ranked[0].segs, except, now); n != nil {
			sh.drop(n)
			return evicted, true
		}
	}
	if sh.pacer.due() {
		found := sh.removeAllExpired(except, now)
		sh.pacer.scanned(found)
		if found > 0 {
			return evicted, true
		}
	}
	n := sh.ranked.victim(except)
	if n == nil {
		return evicted, false
	}
	sh.drop(n)
	return append(evicted, n.key), true
}

// expiredTail returns the least recently used node of a segment of segs,
// other than except, if it has expired at now, or nil.
func expiredTail(segs *segments, except *node, now int64) *node {
	for i := range segs {
		if n := lru(&segs[i], except); n != nil && !n.live(now) {
			return n
		}
	}
	return nil
}

// lruEvictable returns the least recently used node of probation, or if
// there is none of protected, other than except, or nil.
func lruEvictable(segs *segments, except *node) *node {
	if n := lru(&segs[probation], except); n != nil {
		return n
	}
	return lru(&segs[protected], except)
}

// lru returns the least recently used node of l other than except, or nil.
func lru(l *list, except *node) *node {
	n := l.tail
	if n != nil && n == except {
		n = n.links.prev
	}
	return n
}

// removeExpired removes the nodes of segs, other than except, that have
// expired at now, and returns how many it removed. The caller holds mu.
func (sh *shard) removeExpired(segs *segments, except *node, now int64) int {
	found := 0
	for i := range segs {
		l := &segs[i]
		for n := l.tail; n != nil; {
			prev := n.links.prev
			if n != except && !n.live(now) {
				sh.drop(n)
				found++
			}
			n = prev
		}
	}
	return found
}

// removeAllExpired removes the shard's nodes, other than except, that
// have expired at now, and returns how many it removed. The caller holds
// mu.
func (sh *shard) removeAllExpired(except *node, now int64) int {
	found := 0
	for _, n := range sh.nodes {
		if n != except && !n.live(now) {
			sh.drop(n) // deleting from the map being ranged over is allowed
			found++
		}
	}
	return found
}

// sweep removes the entries among keys that have expired at the time now
// returns. It holds mu for one batch of keys at a time so that operations
// are not stalled behind a long sweep.
func (sh *shard) sweep(keys []string, now func() int64) {
	const batch = 256
	for len(keys) > 0 {
		n := min(batch, len(keys))
		sh.mu.Lock()
		t := now()
		for _, k := range keys[:n] {
			sh.peek(k, t)
		}
		sh.mu.Unlock()
		keys = keys[n:]
	}
}

// keys returns a snapshot of the shard's keys.
func (sh *shard) keys() []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Collect(maps.Keys(sh.nodes))
}

// size returns the number of entries, expired or not, the shard holds and
// the bytes it counts.
func (sh *shard) size() (int, int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.nodes), sh.bytes
}

// purge drops every entry.
func (sh *shard) purge() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.init(sh.maxEntries, sh.maxBytes, sh.quota)
}
