package canonjson

import (
	"encoding/binary"
	"slices"
)

// Path is one parsed path, written as described at CheckPath, for reading
// values out of a canonical document (Lookup, AppendSelection).
type Path struct {
	text  string
	steps []step
}

// ParsePath parses path, written as described at CheckPath. It returns an
// error wrapping ErrInvalidPath when path is malformed.
func ParsePath(path string) (Path, error) {
	steps, err := parsePath(path)
	if err != nil {
		return Path{}, err
	}
	return Path{text: path, steps: steps}, nil
}

// String returns the path as it was written.
func (p Path) String() string { return p.text }

// Each reports whether the path reaches into the elements of an array
// ("items[].sku"), so that it names many values rather than one.
func (p Path) Each() bool {
	return slices.ContainsFunc(p.steps, func(s step) bool { return s.elem })
}

// Lookup returns the canonical text of the value p names in canon, a
// canonical document as Parser.Append writes it, and whether there is
// one. It reports false when a member on the way is absent or the
// document has another shape there (an array where p names a member). p
// must not reach into arrays (Each): Lookup reports false for such a path.
func Lookup(canon []byte, p Path) ([]byte, bool) {
	if len(canon) == 0 || p.Each() {
		return nil, false
	}
	i := 0
	for _, s := range p.steps {
		var ok bool
		if i, ok = memberValue(canon, i, s.name); !ok {
			return nil, false
		}
	}
	return canon[i:skipCanonical(canon, i)], true
}

// Selection tags: every selected value is framed by one, so that no two
// different selections hash alike.
const (
	selValue    = 'v' // a value follows: uvarint length, canonical text
	selAbsent   = '-' // the member named is absent
	selMismatch = 'x' // the document has another shape there
	selArray    = 'a' // an array's element selections follow, then selEnd
	selEnd      = 'e'
)

// AppendSelection appends to dst an unambiguous encoding of the values
// the paths name in canon, a canonical document as Parser.Append writes
// it: for each path in the order given, its text and the value it names
// (for a path through arrays, the value in each element), or a mark that
// the value is absent or the document has another shape there. Two
// documents have the same selection exactly when every path names the
// same canonical value, or none, in both.
func AppendSelection(dst, canon []byte, paths []Path) []byte {
	for _, p := range paths {
		dst = binary.AppendUvarint(dst, uint64(len(p.text)))
		dst = append(dst, p.text...)
		dst = appendSelected(dst, canon, 0, p.steps)
	}
	return dst
}

// appendSelected appends the selection of steps below the value at i.
func appendSelected(dst, canon []byte, i int, steps []step) []byte {
	if len(steps) == 0 {
		v := canon[i:skipCanonical(canon, i)]
		dst = append(dst, selValue)
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		return append(dst, v...)
	}
	s := steps[0]
	if !s.elem {
		if canon[i] != '{' {
			return append(dst, selMismatch)
		}
		j, ok := memberValue(canon, i, s.name)
		if !ok {
			return append(dst, selAbsent)
		}
		return appendSelected(dst, canon, j, steps[1:])
	}
	if canon[i] != '[' {
		return append(dst, selMismatch)
	}
	dst = append(dst, selArray)
	i++
	for canon[i] != ']' {
		dst = appendSelected(dst, canon, i, steps[1:])
		i = skipCanonical(canon, i)
		if canon[i] == ',' {
			i++
		}
	}
	return append(dst, selEnd)
}

// memberValue returns the offset of the value of member name of the
// object at offset i of canon, and whether the value at i is an object
// with such a member. The name is compared in its canonical encoding,
// which is unique: the object's names are written the same way.
func memberValue(canon []byte, i int, name string) (int, bool) {
	if canon[i] != '{' {
		return 0, false
	}
	var buf [64]byte
	want := appendString(buf[:0], name)
	i++
	for canon[i] != '}' {
		end := skipCanonical(canon, i) // the name
		if string(canon[i:end]) == string(want) {
			return end + 1, true
		}
		i = skipCanonical(canon, end+1) // past ':' and the value
		if canon[i] == ',' {
			i++
		}
	}
	return 0, false
}

// skipCanonical returns the offset just past the value that starts at
// offset i of canon, a canonical document: compact, its strings escaped
// only with a backslash before one character or \u00XX.
func skipCanonical(canon []byte, i int) int {
	switch canon[i] {
	case '"':
		return skipString(canon, i)
	case '{', '[':
		depth := 0
		for {
			switch canon[i] {
			case '"':
				i = skipString(canon, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(canon) && canon[i] != ',' && canon[i] != '}' && canon[i] != ']' {
		i++
	}
	return i
}

// skipString returns the offset just past the string that starts at i.
func skipString(canon []byte, i int) int {
	for i++; canon[i] != '"'; i++ {
		if canon[i] == '\\' {
			i++ // the escaped character; \u00XX's hex digits are plain
		}
	}
	return i + 1
}
