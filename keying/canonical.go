package keying

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Errors returned by Canonicalize.
var (
	// ErrNotJSON reports a body that is not a single valid JSON value:
	// a syntax error, invalid UTF-8, a lone UTF-16 surrogate escape, data
	// after the value, or nesting deeper than 1000 levels.
	ErrNotJSON = errors.New("keying: not a single valid JSON value")
	// ErrDuplicateName reports an object that holds the same member name
	// twice (after unescaping). Such a document is ambiguous: parsers
	// disagree about which value wins.
	ErrDuplicateName = errors.New("keying: duplicate JSON member name")
)

// maxDepth bounds the nesting of arrays and objects Canonicalize accepts.
const maxDepth = 1000

// Canonicalize returns the canonical form of the JSON document body, with
// the members that volatile names dropped. Each entry of volatile is a path
// written as described at WithVolatile (a bare name is a top-level member
// only); nil drops nothing. Names match case-sensitively after unescaping.
// Documents that differ only in member order, whitespace, or number or
// string spelling have the same canonical form; see the package
// documentation, section "Canonical JSON". Canonicalize is safe for
// concurrent use and does not modify body.
//
// It returns an error wrapping ErrInvalidPath when a path is malformed,
// ErrNotJSON when body is not a single valid JSON value, and
// ErrDuplicateName when an object repeats a member name (dropped names
// included).
func Canonicalize(body []byte, volatile []string) ([]byte, error) {
	root, err := compilePaths(volatile)
	if err != nil {
		return nil, err
	}
	p := getParser()
	defer putParser(p)
	return p.canonicalize(nil, body, root)
}

// canonicalize appends the canonical form of body, without the members
// root drops, to dst.
func (p *parser) canonicalize(dst, body []byte, root *pathNode) ([]byte, error) {
	p.in, p.pos = body, 0
	defer func() { p.in = nil }()
	p.skipSpace()
	out, err := p.value(dst, 0, root)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.fail("data after the JSON value")
	}
	return out, nil
}

// parser is a recursive-descent JSON parser that writes canonical JSON.
// Its buffers are reused across documents through parserPool.
type parser struct {
	in      []byte
	pos     int
	sum     []byte   // Sum's hash input
	str     []byte   // decoded text of the last escaped string value read
	scratch []byte   // copy of an object's members while they are reordered
	digits  []byte   // significant digits of the last number read
	names   []byte   // decoded member names of the objects being parsed
	members []member // members of the objects being parsed, innermost last
}

// member is an object member: its decoded name is names[nameStart:nameEnd]
// and its canonical value out[start:end]. A name written without escapes
// is already canonical: quoted, it is in[quoted:quoted+nameEnd-nameStart+2];
// quoted is -1 for a name with escapes.
type member struct {
	nameStart, nameEnd int
	start, end         int
	quoted             int
	dropped            bool
}

// parserPool recycles parsers and their buffers.
var parserPool = sync.Pool{New: func() any { return new(parser) }}

// maxPooledBuffer is the largest buffer a parser keeps when it is recycled.
const maxPooledBuffer = 64 << 10

// getParser returns a parser from the pool.
func getParser() *parser {
	return parserPool.Get().(*parser)
}

// putParser recycles p unless its buffers grew too large to keep.
func putParser(p *parser) {
	for _, b := range [...][]byte{p.sum, p.scratch, p.str, p.names} {
		if cap(b) > maxPooledBuffer {
			return
		}
	}
	p.in = nil
	p.names, p.members = p.names[:0], p.members[:0]
	parserPool.Put(p)
}

// fail returns an error wrapping ErrNotJSON at the current offset.
func (p *parser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrNotJSON, what, p.pos)
}

// skipSpace skips JSON insignificant whitespace.
func (p *parser) skipSpace() {
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
func (p *parser) next(c byte) bool {
	return p.pos < len(p.in) && p.in[p.pos] == c
}

// value parses one JSON value at the current offset and appends its
// canonical form to out.
// Members and elements that node drops are left out.
func (p *parser) value(out []byte, depth int, node *pathNode) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1, node)
	case c == '[':
		return p.array(out, depth+1, node)
	case c == '"':
		return p.stringValue(out)
	case c == '-' || isDigit(c):
		return p.number(out)
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
func (p *parser) literal(out []byte, word string) ([]byte, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(word)) {
		return nil, p.fail("invalid literal")
	}
	p.pos += len(word)
	return append(out, word...), nil
}

// array parses an array and appends its canonical form to out.
func (p *parser) array(out []byte, depth int, node *pathNode) ([]byte, error) {
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
func (p *parser) object(out []byte, depth int, node *pathNode) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.next('}') {
		p.pos++
		return append(out, '{', '}'), nil
	}
	start, first, names := len(out), len(p.members), len(p.names)
	defer func() { p.members, p.names = p.members[:first], p.names[:names] }()
	for {
		m, next, err := p.member(out, depth, node)
		if err != nil {
			return nil, err
		}
		out, p.members = next, append(p.members, m)
		p.skipSpace()
		switch {
		case p.next(','):
			p.pos++
			p.skipSpace()
		case p.next('}'):
			p.pos++
			return p.emitObject(out, start, p.members[first:])
		default:
			return nil, p.fail("expected ',' or '}' in object")
		}
	}
}

// member parses one "name": value pair of an object at node, appending the
// canonical value to out unless node drops the member.
func (p *parser) member(out []byte, depth int, node *pathNode) (member, []byte, error) {
	if !p.next('"') {
		return member{}, nil, p.fail("expected member name")
	}
	m := member{nameStart: len(p.names), start: len(out), quoted: p.pos}
	names, err := p.appendDecoded(p.names)
	if err != nil {
		return member{}, nil, err
	}
	p.names = names
	m.nameEnd = len(p.names)
	if p.pos-m.quoted != m.nameEnd-m.nameStart+2 { // every escape is longer than its text
		m.quoted = -1
	}
	p.skipSpace()
	if !p.next(':') {
		return member{}, nil, p.fail("expected ':' after member name")
	}
	p.pos++
	p.skipSpace()
	child := node.member(p.name(m))
	if child != nil && child.drop {
		child, m.dropped = nil, true
	}
	if out, err = p.value(out, depth, child); err != nil {
		return member{}, nil, err
	}
	m.end = len(out)
	if m.dropped {
		out = out[:m.start]
	}
	return m, out, nil
}

// name returns the decoded name of m.
func (p *parser) name(m member) []byte {
	return p.names[m.nameStart:m.nameEnd]
}

// emitObject rewrites out[start:], which holds the canonical values of
// members in input order, as the canonical object.
func (p *parser) emitObject(out []byte, start int, members []member) ([]byte, error) {
	p.sortMembers(members)
	for i := 1; i < len(members); i++ {
		if bytes.Equal(p.name(members[i]), p.name(members[i-1])) {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateName, p.name(members[i]))
		}
	}
	p.scratch = append(p.scratch[:0], out[start:]...)
	out = append(out[:start], '{')
	first := true
	for _, m := range members {
		if m.dropped {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if m.quoted >= 0 {
			out = append(out, p.in[m.quoted:m.quoted+m.nameEnd-m.nameStart+2]...)
		} else {
			out = appendString(out, p.name(m))
		}
		out = append(out, ':')
		out = append(out, p.scratch[m.start-start:m.end-start]...)
	}
	return append(out, '}'), nil
}

// sortMembers sorts members by name. Most objects are small, and an
// insertion sort with the comparison inlined beats a generic sort there.
func (p *parser) sortMembers(members []member) {
	if len(members) > 12 {
		slices.SortFunc(members, func(a, b member) int { return bytes.Compare(p.name(a), p.name(b)) })
		return
	}
	for i := 1; i < len(members); i++ {
		m := members[i]
		name := p.name(m)
		j := i
		for ; j > 0 && bytes.Compare(p.name(members[j-1]), name) > 0; j-- {
			members[j] = members[j-1]
		}
		members[j] = m
	}
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool {
	return '0' <= c && c <= '9'
}
