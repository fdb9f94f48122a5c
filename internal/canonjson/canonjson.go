package canonjson

import (
	"errors"
	"fmt"
	"sync"
)

// Errors returned by Canonicalize and Parser.Append. Their texts keep the
// "keying:" prefix: package keying returns them as its own.
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
// written as described at CheckPath; nil drops nothing. Canonicalize is
// safe for concurrent use and does not modify body.
//
// It returns an error wrapping ErrInvalidPath when a path is malformed,
// ErrNotJSON when body is not a single valid JSON value, and
// ErrDuplicateName when an object repeats a member name (dropped names
// included).
func Canonicalize(body []byte, volatile []string) ([]byte, error) {
	paths, err := Compile(volatile)
	if err != nil {
		return nil, err
	}
	if out, ok := AppendFlat(nil, body, paths); ok {
		return out, nil
	}
	p := GetParser()
	out, err := p.Append(nil, body, paths)
	PutParser(p)
	return out, err
}

// Parser is a recursive-descent JSON parser that writes canonical JSON.
// Its buffers are reused across documents: take one with GetParser and
// give it back with PutParser. A Parser is not safe for concurrent use.
type Parser struct {
	// Buf is a buffer for the caller's own use that goes through the pool
	// with the parser, so that one pool round trip serves both (keying
	// builds a fingerprint's hash input in it). PutParser keeps it unless
	// it grew past MaxPooledBuffer.
	Buf []byte

	in      []byte
	pos     int
	str     []byte   // decoded text of the last escaped string value read
	scratch []byte   // copy of an object's members while they are reordered
	digits  []byte   // significant digits of the last number read
	names   []byte   // decoded names, written with escapes, of the objects being parsed
	members []member // members of the objects being parsed, innermost last
}

// member is an object member. Its decoded name is in[name:nameEnd], or
// names[name:nameEnd] when it is written with escapes. Its canonical text,
// "name":value, is out[start:end], or in[start:end] while the object's
// members are all canonical as written (see object); it is empty when the
// member is dropped.
type member struct {
	name, nameEnd int
	start, end    int
	escaped       bool
}

// parserPool recycles parsers and their buffers.
var parserPool = sync.Pool{New: func() any { return new(Parser) }}

// MaxPooledBuffer is the largest buffer a parser keeps when it is
// recycled.
const MaxPooledBuffer = 64 << 10

// GetParser returns a parser from the pool.
func GetParser() *Parser {
	return parserPool.Get().(*Parser)
}

// PutParser recycles p unless its buffers grew too large to keep.
func PutParser(p *Parser) {
	if max(cap(p.Buf), cap(p.scratch), cap(p.str), cap(p.names)) > MaxPooledBuffer {
		return
	}
	p.in = nil
	p.names, p.members = p.names[:0], p.members[:0]
	parserPool.Put(p)
}

// Append appends the canonical form of body, without the members paths
// drops, to dst, with the errors of Canonicalize but ErrInvalidPath. It
// does not try AppendFlat first. The parser refers to body until it is
// recycled.
func (p *Parser) Append(dst, body []byte, paths *Paths) ([]byte, error) {
	p.in, p.pos = body, 0
	p.skipSpace()
	out, err := p.value(dst, 0, paths)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.fail("data after the JSON value")
	}
	return out, nil
}

// fail returns an error wrapping ErrNotJSON at the current offset.
func (p *Parser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrNotJSON, what, p.pos)
}
