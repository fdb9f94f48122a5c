package memstore

// list is a doubly linked list of nodes, most recently used first,
// through their links. A node is in one list at a time: its scope's list
// of its segment.
type list struct {
	head, tail *node
	len        int
}

// pushFront adds n, which is in no list of this kind, as most recently
// used.
func (l *list) pushFront(n *node) {
	n.links = link{next: l.head}
	if l.head != nil {
		l.head.links.prev = n
	} else {
		l.tail = n
	}
	l.head = n
	l.len++
}

// remove takes n, which is in l, out of l.
func (l *list) remove(n *node) {
	lk := &n.links
	if lk.prev != nil {
		lk.prev.links.next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links.prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	*lk = link{}
	l.len--
}

// moveToFront marks n, which is in l, most recently used. The check
// for n already in front inlines; the move does not.
func (l *list) moveToFront(n *node) {
	if l.head != n {
		l.move(n)
	}
}

// move takes n, which is in l, to the front of l.
func (l *list) move(n *node) {
	l.remove(n)
	l.pushFront(n)
}

// Segments of a segmented LRU: entries enter probation and move to
// protected when rewritten by CompareAndSwap; claims in progress, which
// are never evicted while live, are kept apart in claimed.
const (
	probation = 0
	protected = 1
	claimed   = 2
)

// segments is a segmented LRU: one list per segment.
type segments [3]list

// of returns the list of n's segment.
func (s *segments) of(n *node) *list {
	return &s[n.seg%3]
}

// init prepares empty lists.
func (s *segments) init() {
	*s = segments{}
}

// len returns the number of nodes in every segment.
func (s *segments) len() int {
	return s[probation].len + s[protected].len + s[claimed].len
}

// evictable returns the number of nodes that may be evicted while live:
// those of probation and protected.
func (s *segments) evictable() int {
	return s[probation].len + s[protected].len
}
