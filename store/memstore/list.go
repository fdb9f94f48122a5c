package memstore

// list is a doubly linked list of nodes, most recently used first, through
// the links at index w of each node.
type list struct {
	head, tail *node
	len        int
	w          int
}

// pushFront adds n, which is in no list of this kind, as most recently
// used.
func (l *list) pushFront(n *node) {
	n.links[l.w] = link{next: l.head}
	if l.head != nil {
		l.head.links[l.w].prev = n
	} else {
		l.tail = n
	}
	l.head = n
	l.len++
}

// remove takes n, which is in l, out of l.
func (l *list) remove(n *node) {
	lk := &n.links[l.w]
	if lk.prev != nil {
		lk.prev.links[l.w].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[l.w].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	*lk = link{}
	l.len--
}

// moveToFront marks n, which is in l, most recently used.
func (l *list) moveToFront(n *node) {
	if l.head != n {
		l.remove(n)
		l.pushFront(n)
	}
}

// Segments of a segmented LRU: entries enter probation and move to
// protected when rewritten by CompareAndSwap.
const (
	probation = 0
	protected = 1
)

// segments is a segmented LRU: one list per segment.
type segments [2]list

// init prepares empty lists chained through links[w].
func (s *segments) init(w int) {
	s[probation] = list{w: w}
	s[protected] = list{w: w}
}

// len returns the number of nodes in both segments.
func (s *segments) len() int {
	return s[probation].len + s[protected].len
}
