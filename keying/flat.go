package keying

// maxFlatMembers is the most members appendFlatObject handles; their
// offsets are kept in an array on its stack.
const maxFlatMembers = 16

// flatMember is a member of a flat object: its text is in[start:end], and
// its name, without quotes, in[start+1:colon-1].
type flatMember struct {
	start, colon, end int
}

// appendFlatObject appends the canonical form of body, without the members
// root drops, to dst, for the most common small request body: an object of
// at most maxFlatMembers members, written without whitespace, whose names
// have no escapes and whose values are strings, integers or literals that
// verbatimValue accepts, with no name repeated. It then reports true. For
// any other body, valid or not, it appends nothing and reports false, and
// the general parser decides; so the canonical form and errors are the
// parser's in every case.
//
// The members of such an object are canonical as written and need only be
// put in name order; no parser state is needed for that, so the common case
// skips the pooled parser altogether.
func appendFlatObject(dst, body []byte, root *pathNode) ([]byte, bool) {
	n := len(body)
	if n < 2 || body[0] != '{' || body[n-1] != '}' {
		return dst, false
	}
	if n == 2 {
		return append(dst, "{}"...), true
	}
	var members [maxFlatMembers]flatMember
	count := 0
	sorted := true
	for i := 1; ; {
		colon := plainName(body, i)
		if colon < 0 || colon >= n || body[colon] != ':' {
			return dst, false
		}
		end := verbatimValue(body, colon+1)
		if end < 0 || end >= n || count == maxFlatMembers {
			return dst, false
		}
		m := flatMember{start: i, colon: colon, end: end}
		if sorted && count > 0 {
			sorted = compareFlatNames(body, &members[count-1], &m) < 0
		}
		members[count] = m
		count++
		if body[end] == '}' {
			if end != n-1 {
				return dst, false
			}
			break
		}
		if body[end] != ',' {
			return dst, false
		}
		i = end + 1
	}
	ms := members[:count]
	if !sorted && !sortFlatMembers(body, ms) {
		return dst, false // a repeated name: the parser reports it
	}
	if root != nil && root.members != nil {
		return appendFlatDropping(dst, body, ms, root), true
	}
	if sorted {
		return append(dst, body...), true
	}
	dst = append(dst, '{')
	for i := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, body[ms[i].start:ms[i].end]...)
	}
	return append(dst, '}'), true
}

// appendFlatDropping appends the object whose members, in name order, are
// ms, without those root drops.
func appendFlatDropping(dst, body []byte, ms []flatMember, root *pathNode) []byte {
	dst = append(dst, '{')
	comma := false
	for i := range ms {
		m := &ms[i]
		if child := root.members[string(body[m.start+1:m.colon-1])]; child != nil && child.drop {
			continue
		}
		if comma {
			dst = append(dst, ',')
		}
		comma = true
		dst = append(dst, body[m.start:m.end]...)
	}
	return append(dst, '}')
}

// compareFlatNames has the sign of bytes.Compare on the names of a and b.
// Names mostly differ in their first byte, which is compared inline when
// both have one.
func compareFlatNames(body []byte, a, b *flatMember) int {
	x, y := body[a.start+1:a.colon-1], body[b.start+1:b.colon-1]
	if len(x) > 0 && len(y) > 0 && x[0] != y[0] {
		return int(x[0]) - int(y[0])
	}
	return compareNames(x, y)
}

// sortFlatMembers sorts ms by name with an insertion sort. It reports
// false when two members share a name.
func sortFlatMembers(body []byte, ms []flatMember) bool {
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		j := i
		for ; j > 0; j-- {
			c := compareFlatNames(body, &ms[j-1], &m)
			if c == 0 {
				return false
			}
			if c < 0 {
				break
			}
			ms[j] = ms[j-1]
		}
		ms[j] = m
	}
	return true
}
