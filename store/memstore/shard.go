package memstore

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// shard is one independently locked part of a Store: a map of nodes and a
// segmented LRU over them, plus, with a scope quota, one segmented LRU per
// scope. Every field but mu is guarded by mu. The padding keeps
// neighbouring shards' locks on separate cache lines.
type shard struct {
	mu         sync.Mutex
	nodes      map[string]*node
	segs       segments
	pacer      pacer
	scopes     map[string]*scope // nil without a scope quota
	quota      int               // entries per scope; 0 for none
	maxEntries int
	maxBytes   int64
	bytes      int64 // counted as entryCost and scopeCost say
	_          [64]byte
}

// scope is the bookkeeping of one scope's entries in a shard; it exists
// while the scope holds at least one entry.
type scope struct {
	name  string
	segs  segments
	pacer pacer
}

// init prepares an empty shard holding at most maxEntries (>= 1) entries
// and maxBytes bytes, and at most quota entries per scope if quota > 0.
func (sh *shard) init(maxEntries int, maxBytes int64, quota int) {
	sh.nodes = make(map[string]*node)
	sh.segs.init(shardLinks)
	sh.pacer.init(maxEntries)
	sh.maxEntries, sh.maxBytes, sh.quota = maxEntries, maxBytes, quota
	if quota > 0 {
		sh.scopes = make(map[string]*scope)
	}
}

// entryCost is what an entry counts against the byte budget.
func entryCost(key string, value []byte) int64 {
	return int64(len(key)+len(value)) + EntryOverhead
}

// scopeCost is what a scope's bookkeeping counts against the byte budget.
func scopeCost(name string) int64 {
	return int64(len(name)) + scopeOverhead
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

// touch marks n most recently used in its segment, in the shard and in
// its scope. The caller holds mu.
func (sh *shard) touch(n *node) {
	sh.segs.of(n).moveToFront(n)
	if n.scope != nil {
		n.scope.segs.of(n).moveToFront(n)
	}
}

// protect moves n to the protected segment, most recently used. The
// caller holds mu.
func (sh *shard) protect(n *node) {
	if n.protected {
		sh.touch(n)
		return
	}
	sh.segs[probation].remove(n)
	sh.segs[protected].pushFront(n)
	if sc := n.scope; sc != nil {
		sc.segs[probation].remove(n)
		sc.segs[protected].pushFront(n)
	}
	n.protected = true
}

// drop removes n, and its scope if n was the scope's last entry. The
// caller holds mu.
func (sh *shard) drop(n *node) {
	delete(sh.nodes, n.key)
	sh.segs.of(n).remove(n)
	sh.bytes -= entryCost(n.key, n.value)
	if sc := n.scope; sc != nil {
		sc.segs.of(n).remove(n)
		if sc.segs.len() == 0 {
			delete(sh.scopes, sc.name)
			sh.bytes -= scopeCost(sc.name)
		}
	}
}

// insert adds key, which must be absent, in scopeName ("" for none),
// making room first as the package doc's "Eviction" section says. value
// must be the caller's own copy. It appends the keys of the live entries
// it evicted to evicted, and fails with ErrTooLarge, changing nothing, if
// the entry alone exceeds the shard's byte budget. The caller holds mu.
func (sh *shard) insert(key, scopeName string, value []byte, expires, now int64, evicted []string) ([]string, error) {
	if sh.quota == 0 {
		scopeName = ""
	}
	cost := entryCost(key, value)
	if scopeName != "" && cost+scopeCost(scopeName) > sh.maxBytes || cost > sh.maxBytes {
		return evicted, errTooLarge(cost, sh.maxBytes)
	}
	if scopeName != "" {
		for sc := sh.scopes[scopeName]; sc != nil && sc.segs.len() >= sh.quota; sc = sh.scopes[scopeName] {
			var ok bool
			if evicted, ok = sh.makeRoom(&sc.segs, &sc.pacer, nil, now, evicted); !ok {
				break
			}
		}
	}
	for sh.overBy(cost, scopeName) {
		var ok bool
		if evicted, ok = sh.makeRoom(&sh.segs, &sh.pacer, nil, now, evicted); !ok {
			break
		}
	}
	n := &node{key: key, value: value, expires: expires}
	sh.nodes[key] = n
	sh.segs[probation].pushFront(n)
	sh.bytes += cost
	sh.pacer.since++
	if scopeName != "" {
		sc := sh.scopeFor(scopeName)
		n.scope = sc
		sc.segs[probation].pushFront(n)
		sc.pacer.since++
	}
	return evicted, nil
}

// overBy reports whether adding an entry of cost bytes in scopeName would
// take the shard over its entry count or byte budget. The caller holds mu.
func (sh *shard) overBy(cost int64, scopeName string) bool {
	if scopeName != "" && sh.scopes[scopeName] == nil {
		cost += scopeCost(scopeName)
	}
	return len(sh.nodes) >= sh.maxEntries || sh.bytes+cost > sh.maxBytes
}

// scopeFor returns the bookkeeping of scope name, creating it if needed.
// The caller holds mu.
func (sh *shard) scopeFor(name string) *scope {
	sc := sh.scopes[name]
	if sc == nil {
		// A copy, so that the scope does not keep alive the key it was
		// cut from, which may be evicted long before the scope ends.
		name = strings.Clone(name)
		sc = &scope{name: name}
		sc.segs.init(scopeLinks)
		sc.pacer.init(sh.quota)
		sh.scopes[name] = sc
		sh.bytes += scopeCost(name)
	}
	return sc
}

// rewrite replaces n's value with value (the caller's own copy) and its
// expiry, moves n to the protected segment, and makes room for any growth
// as insert does, never evicting n. It fails with ErrTooLarge, changing
// nothing, if n alone would exceed the shard's byte budget. The caller
// holds mu.
func (sh *shard) rewrite(n *node, value []byte, expires, now int64, evicted []string) ([]string, error) {
	cost := entryCost(n.key, value)
	if n.scope != nil && cost+scopeCost(n.scope.name) > sh.maxBytes || cost > sh.maxBytes {
		return evicted, errTooLarge(cost, sh.maxBytes)
	}
	sh.bytes += cost - entryCost(n.key, n.value)
	n.value, n.expires = value, expires
	sh.protect(n)
	for sh.bytes > sh.maxBytes {
		var ok bool
		if evicted, ok = sh.makeRoom(&sh.segs, &sh.pacer, n, now, evicted); !ok {
			break
		}
	}
	return evicted, nil
}

// makeRoom removes at least one node of segs other than except, preferring
// expired nodes to live ones: the least recently used node of either
// segment if it has expired; otherwise every expired node, found by a scan
// of segs if p says one is due; and only if there is none, the least
// recently used live node of probation, or of protected if probation is
// empty. It appends the key of the live node it evicted, if any, to
// evicted, and reports false if segs held nothing it could remove. The
// caller holds mu.
func (sh *shard) makeRoom(segs *segments, p *pacer, except *node, now int64, evicted []string) ([]string, bool) {
	for i := range segs {
		if n := lru(&segs[i], except); n != nil && !n.live(now) {
			sh.drop(n)
			return evicted, true
		}
	}
	if p.due() {
		found := sh.removeExpired(segs, except, now)
		p.scanned(found)
		if found > 0 {
			return evicted, true
		}
	}
	n := lru(&segs[probation], except)
	if n == nil {
		n = lru(&segs[protected], except)
	}
	if n == nil {
		return evicted, false
	}
	sh.drop(n)
	return append(evicted, n.key), true
}

// lru returns the least recently used node of l other than except, or nil.
func lru(l *list, except *node) *node {
	n := l.tail
	if n != nil && n == except {
		n = n.links[l.w].prev
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
			prev := n.links[l.w].prev
			if n != except && !n.live(now) {
				sh.drop(n)
				found++
			}
			n = prev
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
	sh.bytes = 0
}
