package canonjson

import (
	"unicode/utf16"
	"unicode/utf8"
)

// appendDecoded parses a JSON string at the current offset and appends its
// decoded text to buf.
func (p *Parser) appendDecoded(buf []byte) ([]byte, error) {
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
// its canonical form to out. A string without escapes is copied as is.
func (p *Parser) stringValue(out []byte) ([]byte, error) {
	if end := plainString(p.in, p.pos); end >= 0 {
		out = append(out, p.in[p.pos:end]...)
		p.pos = end
		return out, nil
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
func (p *Parser) failUTF8(run int) error {
	p.pos = run
	return p.fail("invalid UTF-8 in a string")
}

// escape decodes the escape sequence at the current offset onto buf.
func (p *Parser) escape(buf []byte) ([]byte, error) {
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

// unicodeEscape decodes the hex digits of a \u escape, which the parser has
// just passed, combining a surrogate pair into one rune.
func (p *Parser) unicodeEscape() (rune, error) {
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
func (p *Parser) hex4() (rune, bool) {
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

// appendString appends the canonical JSON encoding of the valid UTF-8 text
// s to out.
func appendString[T string | []byte](out []byte, s T) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c >= 0x20:
			out = append(out, c)
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0x0f])
		}
	}
	return append(out, '"')
}
