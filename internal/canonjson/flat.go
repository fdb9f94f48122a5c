package canonjson

// Limits of the objects AppendFlat handles: its members' offsets are
// kept in an array on its stack, in 16 bits each.
const (
	maxFlatMembers = 16
	maxFlatBody    = 1<<16 - 1
)

// flatMember is a member of a flat object: its text is body[start:end],
// and its name, without quotes, body[start+1:colon-1]. key holds the
// name's first eight bytes, big-endian, padded with zero bytes: a plain
// name has no zero byte, so the keys of two names order them as the names
// do, unless the keys are equal and both names are eight bytes or longer.
type flatMember struct {
	key               uint64
	start, colon, end uint16
}

// AppendFlat appends the canonical form of body, without the members
// root drops, to dst, for the most common small request body: an object of
// at most maxFlatMembers members and maxFlatBody bytes, written without
// whitespace, whose names have no escapes and whose values are strings,
// integers or literals that verbatimValue accepts, with no name repeated.
// It then reports true. For any other body, valid or not, it appends
// nothing and reports false, and the general parser decides; so the
// canonical form and errors are the parser's in every case.
//
// The members of such an object are canonical as written and need only be
// put in name order; no parser state is needed for that, so the common case
// skips the pooled parser altogether.
func AppendFlat(dst, body []byte, root *Paths) ([]byte, bool) {
	n := len(body)
	if n < 2 || n > maxFlatBody || body[0] != '{' || body[n-1] != '}' {
		return dst, false
	}
	if n == 2 {
		return append(dst, "{}"...), true
	}
	var members [maxFlatMembers]flatMember
	count := 0
	sorted := true
	for i := 1; ; {
		if i >= n || body[i] != '"' {
			return dst, false
		}
		// The most common names and values are recognized inline from one
		// eight-byte read: a name or string value of fewer than eight
		// ASCII bytes. So is an integer that does not start with 0.
		// flatName, plainString and flatValue see to the others.
		var colon, end int
		var key uint64
		j := i + 1
		x := word(body, j)
		if k := plainRun(x); j+k < n && body[j+k] == '"' {
			colon, key = j+k+1, wordKey(x, k)
		} else {
			colon, key = flatName(body, i)
		}
		if colon < 0 || colon >= n-1 || body[colon] != ':' {
			return dst, false
		}
		v := colon + 1
		switch c := body[v]; {
		case c == '"':
			if k := v + 1 + plainRun(word(body, v+1)); k < n && body[k] == '"' {
				end = k + 1
			} else {
				end = plainString(body, v)
			}
		case '1' <= c && c <= '9':
			end = v + 1
			for end < n && isDigit(body[end]) {
				end++
			}
			if end-v > maxPlainIntDigits {
				return dst, false
			}
		default:
			end = flatValue(body, v)
		}
		if end < 0 || end >= n || count == maxFlatMembers {
			return dst, false
		}
		members[count] = flatMember{key: key, start: uint16(i), colon: uint16(colon), end: uint16(end)}
		if sorted && count > 0 {
			switch prev := &members[count-1]; {
			case prev.key > key:
				sorted = false
			case prev.key == key:
				c := compareSameKey(body, prev, &members[count])
				if c == 0 {
					return dst, false // a repeated name: the parser reports it
				}
				sorted = c < 0
			}
		}
		count++
		if c := body[end]; c != ',' {
			if c != '}' || end != n-1 {
				return dst, false
			}
			break
		}
		i = end + 1
	}
	ms := members[:count]
	switch {
	case sorted:
	case count == 2: // in reverse order, so not equal
		ms[0], ms[1] = ms[1], ms[0]
	case !sortFlatMembers(body, ms):
		return dst, false // a repeated name: the parser reports it
	}
	if root != nil && root.members != nil {
		return appendFlatDropping(dst, body, ms, root), true
	}
	if sorted {
		return append(dst, body...), true
	}
	dst = append(dst, '{')
	dst = append(dst, body[ms[0].start:ms[0].end]...)
	for _, m := range ms[1:] {
		dst = append(dst, ',')
		dst = append(dst, body[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

// flatName is plainString for a member name whose opening quote is at
// body[i], in an object body that ends with '}'. It also returns the
// name's key (see flatMember).
func flatName(body []byte, i int) (int, uint64) {
	end := plainString(body, i)
	if end < 0 {
		return -1, 0
	}
	return end, nameKey(body, i+1, end-1)
}

// flatValue is verbatimValue for a value of a flat object that
// AppendFlat does not recognize inline. A value that starts with 0
// is taken to end there: in a longer one (01, 0.5, 0e1) the byte after
// the 0 is not the ',' or '}' the caller requires, so it still falls back.
func flatValue(in []byte, i int) int {
	if in[i] == '0' {
		return i + 1
	}
	return verbatimValue(in, i)
}

// compareSameKey has the sign of bytes.Compare on the names of a and b,
// whose keys are equal.
func compareSameKey(body []byte, a, b *flatMember) int {
	x, y := body[a.start+1:a.colon-1], body[b.start+1:b.colon-1]
	if len(x) < 8 || len(y) < 8 {
		return 0 // a key padded with zero bytes equals only that of the same name
	}
	return compareNames(x[8:], y[8:])
}

// sortFlatMembers sorts ms by name with an insertion sort. It reports
// false when two members share a name.
func sortFlatMembers(body []byte, ms []flatMember) bool {
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		j := i
		for ; j > 0; j-- {
			prev := &ms[j-1]
			if prev.key < m.key {
				break
			}
			if prev.key == m.key {
				c := compareSameKey(body, prev, &m)
				if c == 0 {
					return false
				}
				if c < 0 {
					break
				}
			}
			ms[j] = *prev
		}
		ms[j] = m
	}
	return true
}

// appendFlatDropping appends the object whose members, in name order, are
// ms, without those root drops.
func appendFlatDropping(dst, body []byte, ms []flatMember, root *Paths) []byte {
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
