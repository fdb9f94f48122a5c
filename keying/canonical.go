package keying

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
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
// every object member whose name is in volatile dropped, at any depth
// (inside arrays too). Names match case-sensitively after unescaping.
// Canonicalize is safe for concurrent use and does not modify body.
//
// The canonical form has no insignificant whitespace, and:
//
//   - Object members are sorted by name in byte order of their UTF-8
//     encoding, which is Unicode code point order (not the UTF-16 order of
//     RFC 8785).
//   - Strings are written with the escapes \" \\ \b \f \n \r \t, \u00XX
//     (lower-case hex) for other control characters, and every other
//     character as raw UTF-8; so "\u0041" and "A" are the same string.
//   - Numbers are written by value with no precision loss (they never go
//     through float64): 1, 1.0, 1e0 and 10E-1 all become 1, -0 becomes 0.
//     Integers of up to 40 digits are written in full; fractions whose
//     first significant digit lies at most 7 places after the point are
//     written as plain decimals (0.0000001); all others use the form
//     d.ddde±x (1e40, 1.5e-8).
//   - Array elements keep their order.
//
// It returns an error wrapping ErrNotJSON when body is not a single valid
// JSON value, and one wrapping ErrDuplicateName when an object repeats a
// member name (volatile names included).
func Canonicalize(body []byte, volatile []string) ([]byte, error) {
	return canonicalize(nil, body, volatile)
}

// canonicalize appends the canonical form of body to dst.
func canonicalize(dst, body []byte, volatile []string) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrNotJSON)
	}
	p := getParser(body, volatile)
	defer putParser(p)
	p.skipSpace()
	out, err := p.value(dst, 0)
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
	in       []byte
	pos      int
	volatile []string
	str      []byte   // decoded text of the last string read
	scratch  []byte   // copy of an object's members while they are reordered
	digits   []byte   // significant digits of the last number read
	names    []byte   // decoded member names of the objects being parsed
	members  []member // members of the objects being parsed, innermost last
}

// member is an object member: its decoded name is names[nameStart:nameEnd]
// and its canonical value out[start:end].
type member struct {
	nameStart, nameEnd int
	start, end         int
	dropped            bool
}

// parserPool recycles parsers and their buffers.
var parserPool = sync.Pool{New: func() any { return new(parser) }}

// maxPooledBuffer is the largest buffer a parser keeps when it is recycled.
const maxPooledBuffer = 64 << 10

// getParser returns a parser ready to read in.
func getParser(in []byte, volatile []string) *parser {
	p := parserPool.Get().(*parser)
	p.in, p.pos, p.volatile = in, 0, volatile
	return p
}

// putParser recycles p unless its buffers grew too large to keep.
func putParser(p *parser) {
	if cap(p.scratch) > maxPooledBuffer || cap(p.str) > maxPooledBuffer || cap(p.names) > maxPooledBuffer {
		return
	}
	p.in, p.volatile = nil, nil
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
func (p *parser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
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
func (p *parser) array(out []byte, depth int) ([]byte, error) {
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
	for {
		var err error
		if out, err = p.value(out, depth); err != nil {
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
func (p *parser) object(out []byte, depth int) ([]byte, error) {
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
		m, next, err := p.member(out, depth)
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

// member parses one "name": value pair, appending the canonical value to
// out unless the name is volatile.
func (p *parser) member(out []byte, depth int) (member, []byte, error) {
	if !p.next('"') {
		return member{}, nil, p.fail("expected member name")
	}
	raw, err := p.string()
	if err != nil {
		return member{}, nil, err
	}
	m := member{nameStart: len(p.names), start: len(out)}
	p.names = append(p.names, raw...)
	m.nameEnd = len(p.names)
	p.skipSpace()
	if !p.next(':') {
		return member{}, nil, p.fail("expected ':' after member name")
	}
	p.pos++
	p.skipSpace()
	if out, err = p.value(out, depth); err != nil {
		return member{}, nil, err
	}
	m.end = len(out)
	if p.isVolatile(p.name(m)) {
		m.dropped = true
		out = out[:m.start]
	}
	return m, out, nil
}

// name returns the decoded name of m.
func (p *parser) name(m member) []byte {
	return p.names[m.nameStart:m.nameEnd]
}

// isVolatile reports whether name is one of the fields to drop.
func (p *parser) isVolatile(name []byte) bool {
	for _, v := range p.volatile {
		if string(name) == v {
			return true
		}
	}
	return false
}

// emitObject rewrites out[start:], which holds the canonical values of
// members in input order, as the canonical object.
func (p *parser) emitObject(out []byte, start int, members []member) ([]byte, error) {
	slices.SortFunc(members, func(a, b member) int { return bytes.Compare(p.name(a), p.name(b)) })
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
		out = appendString(out, p.name(m))
		out = append(out, ':')
		out = append(out, p.scratch[m.start-start:m.end-start]...)
	}
	return append(out, '}'), nil
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool {
	return '0' <= c && c <= '9'
}
