package memstore

// scopeHeap is a max-heap of a shard's scopes by their evictable entries,
// so that the scope holding the most gives first when the shard is full.
// Entries move in and out of a scope one at a time, so a fix after each
// move costs a comparison or two.
type scopeHeap []*scope

// higher reports whether the scope at i ranks above the one at j.
func (h scopeHeap) higher(i, j int) bool {
	return h[i].segs.evictable() > h[j].segs.evictable()
}

func (h scopeHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].rank, h[j].rank = i, j
}

// up moves the scope at i towards the root while it ranks above its
// parent, and reports whether it moved.
func (h scopeHeap) up(i int) bool {
	moved := false
	for i > 0 {
		parent := (i - 1) / 2
		if !h.higher(i, parent) {
			break
		}
		h.swap(i, parent)
		i, moved = parent, true
	}
	return moved
}

// down moves the scope at i towards the leaves while a child ranks above
// it.
func (h scopeHeap) down(i int) {
	for {
		top, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h.higher(l, top) {
			top = l
		}
		if r < len(h) && h.higher(r, top) {
			top = r
		}
		if top == i {
			return
		}
		h.swap(i, top)
		i = top
	}
}

// push adds sc.
func (h *scopeHeap) push(sc *scope) {
	sc.rank = len(*h)
	*h = append(*h, sc)
	h.up(sc.rank)
}

// remove takes sc, which is in h, out of h.
func (h *scopeHeap) remove(sc *scope) {
	i, last := sc.rank, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.fix((*h)[i])
	}
}

// fix restores the order after sc's evictable entries changed.
func (h scopeHeap) fix(sc *scope) {
	if !h.up(sc.rank) {
		h.down(sc.rank)
	}
}

// victim returns the node to evict: the least recently used evictable
// node, other than except, of the scope holding the most evictable nodes,
// or nil if there is none. When the top scope's only evictable node is
// except, the next scope (one of the root's children) gives instead.
func (h scopeHeap) victim(except *node) *node {
	if len(h) == 0 {
		return nil
	}
	if n := lruEvictable(&h[0].segs, except); n != nil {
		return n
	}
	next := 1
	if len(h) > 2 && h.higher(2, 1) {
		next = 2
	}
	if next >= len(h) {
		return nil
	}
	return lruEvictable(&h[next].segs, except)
}
