package canonjson

// This file keeps the canonicalizer as it was before its fast paths
// (commit bed18c8), as the reference the current one must match byte for
// byte, errors included; see TestCanonicalizeMatchesReference.

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// refCanonicalize is Canonicalize as it was before the fast paths.
func refCanonicalize(body []byte, volatile []string) ([]byte, error) {
	root, err := Compile(volatile)
	if err != nil {
		return nil, err
	}
	return new(refParser).canonicalize(nil, body, root)
}

// canonicalize appends the canonical form of body, without the members
// root drops, to dst.
func (p *refParser) canonicalize(dst, body []byte, root *Paths) ([]byte, error) {
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

// refParser is a recursive-descent JSON parser that writes canonical JSON.
type refParser struct {
	in      []byte
	pos     int
	str     []byte      // decoded text of the last escaped string value read
	scratch []byte      // copy of an object's members while they are reordered
	digits  []byte      // significant digits of the last number read
	names   []byte      // decoded member names of the objects being parsed
	members []refMember // members of the objects being parsed, innermost last
}

// refMember is an object member: its decoded name is names[nameStart:nameEnd]
// and its canonical value out[start:end]. A name written without escapes
// is already canonical: quoted, it is in[quoted:quoted+nameEnd-nameStart+2];
// quoted is -1 for a name with escapes.
type refMember struct {
	nameStart, nameEnd int
	start, end         int
	quoted             int
	dropped            bool
}

// fail returns an error wrapping ErrNotJSON at the current offset.
func (p *refParser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrNotJSON, what, p.pos)
}

// skipSpace skips JSON insignificant whitespace.
func (p *refParser) skipSpace() {
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
func (p *refParser) next(c byte) bool {
	return p.pos < len(p.in) && p.in[p.pos] == c
}

// value parses one JSON value at the current offset and appends its
// canonical form to out.
// Members and elements that node drops are left out.
func (p *refParser) value(out []byte, depth int, node *Paths) ([]byte, error) {
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
func (p *refParser) literal(out []byte, word string) ([]byte, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(word)) {
		return nil, p.fail("invalid literal")
	}
	p.pos += len(word)
	return append(out, word...), nil
}

// array parses an array and appends its canonical form to out.
func (p *refParser) array(out []byte, depth int, node *Paths) ([]byte, error) {
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
func (p *refParser) object(out []byte, depth int, node *Paths) ([]byte, error) {
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
func (p *refParser) member(out []byte, depth int, node *Paths) (refMember, []byte, error) {
	if !p.next('"') {
		return refMember{}, nil, p.fail("expected member name")
	}
	m := refMember{nameStart: len(p.names), start: len(out), quoted: p.pos}
	names, err := p.appendDecoded(p.names)
	if err != nil {
		return refMember{}, nil, err
	}
	p.names = names
	m.nameEnd = len(p.names)
	if p.pos-m.quoted != m.nameEnd-m.nameStart+2 { // every escape is longer than its text
		m.quoted = -1
	}
	p.skipSpace()
	if !p.next(':') {
		return refMember{}, nil, p.fail("expected ':' after member name")
	}
	p.pos++
	p.skipSpace()
	child := node.member(p.name(m))
	if child != nil && child.drop {
		child, m.dropped = nil, true
	}
	if out, err = p.value(out, depth, child); err != nil {
		return refMember{}, nil, err
	}
	m.end = len(out)
	if m.dropped {
		out = out[:m.start]
	}
	return m, out, nil
}

// name returns the decoded name of m.
func (p *refParser) name(m refMember) []byte {
	return p.names[m.nameStart:m.nameEnd]
}

// emitObject rewrites out[start:], which holds the canonical values of
// members in input order, as the canonical object.
func (p *refParser) emitObject(out []byte, start int, members []refMember) ([]byte, error) {
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
func (p *refParser) sortMembers(members []refMember) {
	if len(members) > 12 {
		slices.SortFunc(members, func(a, b refMember) int { return bytes.Compare(p.name(a), p.name(b)) })
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

// appendDecoded parses a JSON string at the current offset and appends its
// decoded text to buf.
func (p *refParser) appendDecoded(buf []byte) ([]byte, error) {
	p.pos++ // opening quote
	for {
		run := p.pos
		var seen byte // every byte of the run ORed: 0x80 is set when one is not ASCII
		for p.pos < len(p.in) && plainStringByte(p.in[p.pos]) {
			seen |= p.in[p.pos]
			p.pos++
		}
		if seen >= utf8.RuneSelf && !utf8.Valid(p.in[run:p.pos]) {
			return nil, p.failUTF8(run)
		}
		buf = append(buf, p.in[run:p.pos]...)
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated string")
		}
		switch c := p.in[p.pos]; {
		case c == '"':
			p.pos++
			return buf, nil
		case c == '\\':
			var err error
			if buf, err = p.escape(buf); err != nil {
				return nil, err
			}
		default:
			return nil, p.fail("control character in string")
		}
	}
}

// stringValue parses a JSON string value at the current offset and appends
// its canonical form to out. A string without escapes is already canonical
// (the input is valid UTF-8), so it is copied as is.
func (p *refParser) stringValue(out []byte) ([]byte, error) {
	start := p.pos
	end := start + 1
	var seen byte // every byte ORed: 0x80 is set when one is not ASCII
	for end < len(p.in) && plainStringByte(p.in[end]) {
		seen |= p.in[end]
		end++
	}
	if seen >= utf8.RuneSelf && !utf8.Valid(p.in[start+1:end]) {
		return nil, p.failUTF8(start + 1)
	}
	if end < len(p.in) && p.in[end] == '"' {
		p.pos = end + 1
		return append(out, p.in[start:p.pos]...), nil
	}
	s, err := p.appendDecoded(p.str[:0])
	if err != nil {
		return nil, err
	}
	p.str = s
	return appendString(out, s), nil
}

// failUTF8 returns an error wrapping ErrNotJSON for invalid UTF-8 in the
// run of string text that starts at offset run. Text outside strings is
// ASCII or a syntax error, and a UTF-8 sequence never spans a quote,
// backslash or control character, so checking each run of plain string
// bytes checks the whole document.
func (p *refParser) failUTF8(run int) error {
	p.pos = run
	return p.fail("invalid UTF-8 in a string")
}

// escape decodes the escape sequence at the current offset onto buf.
func (p *refParser) escape(buf []byte) ([]byte, error) {
	if p.pos+1 >= len(p.in) {
		return nil, p.fail("unterminated escape")
	}
	c := p.in[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		r, err := p.unicodeEscape()
		if err != nil {
			return nil, err
		}
		return utf8.AppendRune(buf, r), nil
	}
	p.pos -= 2
	return nil, p.fail("invalid escape")
}

// unicodeEscape decodes the hex digits of a \u escape, which the refParser has
// just passed, combining a surrogate pair into one rune.
func (p *refParser) unicodeEscape() (rune, error) {
	r, ok := p.hex4()
	if !ok {
		return 0, p.fail("invalid \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if r >= 0xdc00 || !p.next('\\') || p.pos+1 >= len(p.in) || p.in[p.pos+1] != 'u' {
		return 0, p.fail("lone surrogate in \\u escape")
	}
	p.pos += 2
	lo, ok := p.hex4()
	if !ok {
		return 0, p.fail("invalid \\u escape")
	}
	pair := utf16.DecodeRune(r, lo)
	if pair == utf8.RuneError {
		return 0, p.fail("lone surrogate in \\u escape")
	}
	return pair, nil
}

// hex4 reads four hex digits.
func (p *refParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	p.pos += 4
	return r, true
}

// number parses a JSON number at the current offset and appends its
// canonical form to out.
func (p *refParser) number(out []byte) ([]byte, error) {
	neg := p.next('-')
	if neg {
		p.pos++
	}
	intPart, ok := p.digitRun()
	if !ok || (len(intPart) > 1 && intPart[0] == '0') {
		return nil, p.fail("invalid number")
	}
	var frac, exp []byte
	if p.next('.') {
		p.pos++
		if frac, ok = p.digitRun(); !ok {
			return nil, p.fail("invalid number fraction")
		}
	}
	expNeg := false
	if p.next('e') || p.next('E') {
		p.pos++
		if p.next('+') || p.next('-') {
			expNeg = p.in[p.pos] == '-'
			p.pos++
		}
		if exp, ok = p.digitRun(); !ok {
			return nil, p.fail("invalid number exponent")
		}
	}
	p.digits = append(append(p.digits[:0], intPart...), frac...)
	return appendDecimal(out, neg, p.digits, len(frac), expNeg, exp), nil
}

// digitRun consumes one or more ASCII digits and returns them.
func (p *refParser) digitRun() ([]byte, bool) {
	start := p.pos
	for p.pos < len(p.in) && isDigit(p.in[p.pos]) {
		p.pos++
	}
	return p.in[start:p.pos], p.pos > start
}
