package canonjson

import (
	"bytes"
	"fmt"
	"slices"
)

// skipSpace skips JSON insignificant whitespace. Most tokens follow the
// previous one directly, so that case is decided inline.
func (p *Parser) skipSpace() {
	if p.pos < len(p.in) && p.in[p.pos] <= ' ' {
		p.skipSpaceRun()
	}
}

// skipSpaceRun skips the whitespace that starts at the current offset.
func (p *Parser) skipSpaceRun() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// next reports whether the byte at the current offset is c.
func (p *Parser) next(c byte) bool {
	return p.pos < len(p.in) && p.in[p.pos] == c
}

// value parses one JSON value at the current offset and appends its
// canonical form to out.
// Members and elements that node drops are left out.
func (p *Parser) value(out []byte, depth int, node *Paths) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '"':
		return p.stringValue(out)
	case c == '-' || isDigit(c):
		return p.number(out)
	case c == '{':
		return p.object(out, depth+1, node)
	case c == '[':
		return p.array(out, depth+1, node)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	}
	return nil, p.fail("unexpected character")
}

// literal parses the keyword word and appends it to out.
func (p *Parser) literal(out []byte, word string) ([]byte, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(word)) {
		return nil, p.fail("invalid literal")
	}
	p.pos += len(word)
	return append(out, word...), nil
}

// array parses an array and appends its canonical form to out.
func (p *Parser) array(out []byte, depth int, node *Paths) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // '['
	out = append(out, '[')
	p.skipSpace()
	if p.next(']') {
		p.pos++
		return append(out, ']'), nil
	}
	elem := node.element()
	for {
		var err error
		if out, err = p.value(out, depth, elem); err != nil {
			return nil, err
		}
		p.skipSpace()
		switch {
		case p.next(','):
			p.pos++
			p.skipSpace()
			out = append(out, ',')
		case p.next(']'):
			p.pos++
			return append(out, ']'), nil
		default:
			return nil, p.fail("expected ',' or ']' in array")
		}
	}
}

// object parses an object and appends its canonical form to out.
//
// While every member read is canonical as written ("name":value with no
// spaces, a name without escapes and a value that verbatimValue accepts)
// or dropped, the members stay in the input: at the end they are copied
// from there in name order, or in one piece when they were in order and
// adjacent. Once a member is not, the members so far are written to out
// in input order, and so are the next ones as they are read; at the end
// they are reordered only if their names were not already in strictly
// increasing order (which also rules out duplicates).
func (p *Parser) object(out []byte, depth int, node *Paths) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // '{'
	p.skipSpace()
	start := len(out)
	out = append(out, '{')
	if p.next('}') {
		p.pos++
		return append(out, '}'), nil
	}
	first, names := len(p.members), len(p.names)
	sorted, inInput, adjacent := true, true, true
	var prev []byte // the name of the member before
	for {
		quote := p.pos
		var m member
		if end := plainName(p.in, quote); end >= 0 { // not copied: m refers to it in the input
			m.name, m.nameEnd, p.pos = quote+1, end-1, end
		} else if err := p.memberName(&m); err != nil {
			return nil, err
		}
		name := p.name(&m)
		if sorted && len(p.members) > first {
			sorted = compareNames(prev, name) < 0
		}
		prev = name
		child := node.member(name)
		dropped := child != nil && child.drop
		verbatim := -1
		if !dropped && !m.escaped && p.next(':') {
			verbatim = verbatimValue(p.in, p.pos+1)
		}
		var err error
		switch {
		case verbatim >= 0 && inInput:
			if len(p.members) > first && quote != p.members[len(p.members)-1].end+1 {
				adjacent = false // spaces around the comma
			}
			m.start, m.end, p.pos = quote, verbatim, verbatim
		case verbatim >= 0:
			if len(out) > start+1 {
				out = append(out, ',')
			}
			m.start = len(out)
			out = append(out, p.in[quote:verbatim]...)
			m.end, p.pos = len(out), verbatim
		default:
			if inInput && !dropped {
				out = p.writeInputMembers(out, start, p.members[first:])
				inInput = false
			}
			adjacent = false
			if out, err = p.memberValue(out, start, &m, name, child, depth); err != nil {
				return nil, err
			}
		}
		p.members = append(p.members, m)
		p.skipSpace()
		switch {
		case p.next(','):
			p.pos++
			p.skipSpace()
			continue
		case !p.next('}'):
			return nil, p.fail("expected ',' or '}' in object")
		}
		p.pos++
		members := p.members[first:]
		switch {
		case inInput && sorted && adjacent:
			out = append(out, p.in[members[0].start:members[len(members)-1].end]...)
		case inInput:
			if !sorted {
				if err = p.sortMembers(members); err != nil {
					return nil, err
				}
			}
			out = appendMembers(out, p.in, 0, members)
		case !sorted:
			if err = p.sortMembers(members); err != nil {
				return nil, err
			}
			body := start + 1 // after '{'
			p.scratch = append(p.scratch[:0], out[body:]...)
			out = appendMembers(out[:body], p.scratch, body, members)
		}
		p.members, p.names = p.members[:first], p.names[:names]
		return append(out, '}'), nil
	}
}

// writeInputMembers appends members, whose texts are still in the input,
// to out, where the object starts at out[start], and records where their
// texts now lie.
func (p *Parser) writeInputMembers(out []byte, start int, members []member) []byte {
	for i := range members {
		m := &members[i]
		if m.start == m.end { // dropped
			m.start, m.end = len(out), len(out)
			continue
		}
		if len(out) > start+1 {
			out = append(out, ',')
		}
		text := p.in[m.start:m.end]
		m.start = len(out)
		out = append(out, text...)
		m.end = len(out)
	}
	return out
}

// appendMembers appends the texts of members, src[m.start-base:m.end-base]
// for each member m, separated by commas, to out.
func appendMembers(out, src []byte, base int, members []member) []byte {
	comma := false
	for i := range members {
		m := &members[i]
		if m.start == m.end { // dropped
			continue
		}
		if comma {
			out = append(out, ',')
		}
		comma = true
		out = append(out, src[m.start-base:m.end-base]...)
	}
	return out
}

// memberName parses the name of a member at the current offset into m,
// for a name that plainName does not accept: one with escapes, or not a
// valid name at all.
func (p *Parser) memberName(m *member) error {
	if !p.next('"') {
		return p.fail("expected member name")
	}
	names, err := p.appendDecoded(p.names)
	if err != nil {
		return err
	}
	m.name, m.nameEnd, m.escaped = len(p.names), len(names), true
	p.names = names
	return nil
}

// memberValue parses the ':' and value of member m, whose decoded name is
// name, in the object that starts at out[start]. Unless child drops the
// member, it appends the member's canonical text to out, after a comma
// when another member precedes it, and records where that text lies in m.
func (p *Parser) memberValue(out []byte, start int, m *member, name []byte, child *Paths, depth int) ([]byte, error) {
	p.skipSpace()
	if !p.next(':') {
		return nil, p.fail("expected ':' after member name")
	}
	p.pos++
	p.skipSpace()
	if child != nil && child.drop {
		m.start, m.end = len(out), len(out)
		_, err := p.value(out, depth, nil)
		return out, err
	}
	if len(out) > start+1 {
		out = append(out, ',')
	}
	m.start = len(out)
	if m.escaped {
		out = appendString(out, name)
	} else {
		out = append(out, p.in[m.name-1:m.nameEnd+1]...) // quoted
	}
	out = append(out, ':')
	out, err := p.value(out, depth, child)
	m.end = len(out)
	return out, err
}

// name returns the decoded name of m.
func (p *Parser) name(m *member) []byte {
	if m.escaped {
		return p.names[m.name:m.nameEnd]
	}
	return p.in[m.name:m.nameEnd]
}

// sortMembers sorts members by name, failing with ErrDuplicateName when
// two share one. Most objects are small, and an insertion sort with the
// comparison inlined beats a generic sort there; it also tells whether
// there is a duplicate, as each member it places stops at an equal name
// if there is one before it.
func (p *Parser) sortMembers(members []member) error {
	dup := true
	if len(members) > 12 {
		slices.SortFunc(members, func(a, b member) int { return compareNames(p.name(&a), p.name(&b)) })
	} else {
		dup = false
		for i := 1; i < len(members); i++ {
			m := members[i]
			name := p.name(&m)
			j := i
			for ; j > 0; j-- {
				c := compareNames(p.name(&members[j-1]), name)
				if c <= 0 {
					dup = dup || c == 0
					break
				}
				members[j] = members[j-1]
			}
			members[j] = m
		}
	}
	if dup {
		for i := 1; i < len(members); i++ {
			if bytes.Equal(p.name(&members[i]), p.name(&members[i-1])) {
				return fmt.Errorf("%w: %q", ErrDuplicateName, p.name(&members[i]))
			}
		}
	}
	return nil
}

// compareNames has the sign of bytes.Compare(a, b). Names mostly differ
// in their first byte, which is compared inline.
func compareNames(a, b []byte) int {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] {
		return int(a[0]) - int(b[0])
	}
	return bytes.Compare(a, b)
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool {
	return '0' <= c && c <= '9'
}
