package keying

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/url"
	"slices"

	"github.com/idemkit/idemkit/internal/b64url"
	"github.com/idemkit/idemkit/internal/canonjson"
	"github.com/idemkit/idemkit/store"
)

// fingerprintDomain starts every fingerprint's hash input, naming the
// scheme and its version. It is two bytes: every byte of the framing is
// hashed on every request, and a hash input of up to 55 bytes (domain,
// fields and body) takes one SHA-256 block.
const fingerprintDomain = "F\x03"

// Body kinds, hashed before the body so that a canonical JSON body and the
// same bytes hashed raw never collide.
const (
	bodyJSON byte = 'J'
	bodyRaw  byte = 'R'
	// bodySelected is a JSON body of which only WithInclude's paths
	// are hashed.
	bodySelected byte = 'S'
)

// flatSumBuffer is the size of the buffer on the stack that AppendSum
// hashes a small flat body from. flatSumFraming is the most bytes the
// framing adds to the fields and body when they fit that buffer: the
// domain, two uvarint lengths below 2^14 (two bytes each), the empty
// parameter count and the body kind.
const (
	flatSumBuffer  = 256
	flatSumFraming = len(fingerprintDomain) + 2 + 2 + 1 + 1
)

// SumLen is the length of every fingerprint: the unpadded base64url text
// (RFC 4648 §5) of the first sumBytes bytes of a SHA-256 digest.
const SumLen = 22

// sumBytes is how much of the digest a fingerprint keeps: 128 bits. Two
// requests share a fingerprint by accident only after about 2^64 of them,
// and a caller who crafts a pair (about 2^64 hashes) only confuses its own
// key. Every record stores one, so the shorter text keeps records small
// (a Redis claim record then takes one allocation less per claim).
const sumBytes = 16

// Fingerprinter computes request fingerprints. It is immutable once built
// and safe for concurrent use. The zero value drops nothing, like
// NewFingerprinter().
type Fingerprinter struct {
	root    *canonjson.Paths
	paths   []string         // sorted, without duplicates
	include []canonjson.Path // WithInclude's paths, sorted, without duplicates; nil for the whole body
}

// NewFingerprinter returns a Fingerprinter that hashes whole payloads,
// except the members named by WithVolatile options. It refuses a nil
// option and an option that fails, such as WithVolatile with a malformed
// path: the error wraps store.ErrInvalid, names each culprit (a nil
// option by its position, counted from 1) and wraps every option's own
// error, ErrInvalidPath for a malformed path.
func NewFingerprinter(opts ...Option) (*Fingerprinter, error) {
	var c config
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	root, err := canonjson.Compile(c.volatile)
	if err != nil { // the options checked every path
		return nil, fmt.Errorf("keying: %w: %w", store.ErrInvalid, err)
	}
	paths := slices.Clone(c.volatile)
	slices.Sort(paths)
	f := &Fingerprinter{root: root, paths: slices.Compact(paths)}
	include := slices.Clone(c.include)
	slices.Sort(include)
	for _, path := range slices.Compact(include) {
		p, err := canonjson.ParsePath(path)
		if err != nil { // the options checked every path
			return nil, fmt.Errorf("keying: %w: %w", store.ErrInvalid, err)
		}
		f.include = append(f.include, p)
	}
	return f, nil
}

// Include returns a new slice holding the paths f hashes (WithInclude),
// sorted, or nil when f hashes whole bodies.
func (f *Fingerprinter) Include() []string {
	var out []string
	for _, p := range f.include {
		out = append(out, p.String())
	}
	return out
}

// Volatile returns a new slice holding the paths f drops, sorted.
func (f *Fingerprinter) Volatile() []string {
	return slices.Clone(f.paths)
}

// Sum returns the fingerprint of a request, SumLen characters of base64url
// text: a SHA-256 digest of its principal, its operation (a route pattern
// or RPC method name), the parameters that select what it acts on (query
// string or metadata; nil for none) and its body. A valid JSON body without
// duplicate member names is hashed in its canonical form (see Canonicalize)
// without f's volatile members, any other body as raw bytes; no bytes can
// move between fields without changing the fingerprint. See the package
// documentation, section "Fingerprints", for how each field is hashed.
func (f *Fingerprinter) Sum(principal, operation string, params url.Values, body []byte) string {
	var text [SumLen]byte
	return string(f.AppendSum(text[:0], principal, operation, params, body))
}

// AppendSum appends Sum(principal, operation, params, body), SumLen bytes,
// to dst and returns the extended buffer, so that a fingerprint can be
// built next to other text without a string of its own. It keeps no
// reference to its arguments after it returns, so they may be views of
// memory the caller reuses.
func (f *Fingerprinter) AppendSum(dst []byte, principal, operation string, params url.Values, body []byte) []byte {
	if f.include != nil {
		return f.appendIncludedSum(dst, principal, operation, params, body)
	}
	// A small flat object, the usual body, is hashed from a buffer on the
	// stack without the pooled parser. The hash input, head and canonical
	// body, is at most as long as the fields and body plus the framing
	// (see flatSumFraming), so it fits.
	var stack [flatSumBuffer]byte
	if len(params) == 0 && len(principal)+len(operation)+len(body) <= flatSumBuffer-flatSumFraming {
		head := appendHead(stack[:0], principal, operation, nil)
		if in, ok := canonjson.AppendFlat(append(head, bodyJSON), body, f.root); ok {
			return appendSumText(dst, sha256.Sum256(in))
		}
	}
	p := canonjson.GetParser()
	head := appendHead(p.Buf[:0], principal, operation, params)
	p.Buf = head
	var sum [sha256.Size]byte
	if in, err := p.Append(append(head, bodyJSON), body, f.root); err != nil {
		sum = sumRaw(p, head, body)
	} else {
		p.Buf = in
		sum = sha256.Sum256(in)
	}
	canonjson.PutParser(p)
	return appendSumText(dst, sum)
}

// appendIncludedSum is AppendSum for a fingerprinter with WithInclude
// paths: a JSON body is hashed as the selection of those paths from its
// canonical form, in a domain of its own; any other body raw.
func (f *Fingerprinter) appendIncludedSum(dst []byte, principal, operation string, params url.Values, body []byte) []byte {
	p := canonjson.GetParser()
	canon, err := p.Append(nil, body, f.root)
	head := appendHead(p.Buf[:0], principal, operation, params)
	var sum [sha256.Size]byte
	if err != nil {
		sum = sumRaw(p, head, body)
	} else {
		in := canonjson.AppendSelection(append(head, bodySelected), canon, f.include)
		p.Buf = in
		sum = sha256.Sum256(in)
	}
	canonjson.PutParser(p)
	return appendSumText(dst, sum)
}

// SumRaw is Sum without JSON detection: the body is always hashed as raw
// bytes, which suits deterministic binary encodings such as protobuf
// marshaled with Deterministic set. For a body that is not JSON, SumRaw and
// Sum agree.
func (f *Fingerprinter) SumRaw(principal, operation string, params url.Values, body []byte) string {
	p := canonjson.GetParser()
	sum := sumRaw(p, appendHead(p.Buf[:0], principal, operation, params), body)
	canonjson.PutParser(p)
	var text [SumLen]byte
	return string(appendSumText(text[:0], sum))
}

// sumRaw returns the digest of head, which p.Buf holds, followed by the
// raw body. A body that fits the pooled buffer is copied after head and
// hashed in one call; a larger one is streamed rather than copied.
func sumRaw(p *canonjson.Parser, head, body []byte) [sha256.Size]byte {
	head = append(head, bodyRaw)
	var sum [sha256.Size]byte
	if len(head)+len(body) > canonjson.MaxPooledBuffer {
		h := sha256.New()
		h.Write(head)
		h.Write(body)
		h.Sum(sum[:0])
		return sum
	}
	p.Buf = append(head, body...)
	return sha256.Sum256(p.Buf)
}

// appendSumText appends the text form of a fingerprint digest to dst: the
// unpadded base64url text of its first sumBytes bytes.
func appendSumText(dst []byte, sum [sha256.Size]byte) []byte {
	return b64url.Append16(dst, [sumBytes]byte(sum[:sumBytes]))
}

// appendHead appends the framed fields that precede the body to b: the
// domain, then principal, operation and params, each self-delimiting.
func appendHead(b []byte, principal, operation string, params url.Values) []byte {
	b = append(b, fingerprintDomain...)
	b = appendField(b, principal)
	b = appendField(b, operation)
	if len(params) == 0 {
		return append(b, 0) // no names: the common case, without a call
	}
	return appendParams(b, params)
}

// appendField appends the uvarint length of s, then s.
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendParams appends the number of names that have values, then each
// such name in sorted order followed by its count of values and the values
// in order.
func appendParams(b []byte, params url.Values) []byte {
	var stack [8]string // most requests carry a few parameters at most
	names := stack[:0]
	for name, values := range params {
		if len(values) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendField(b, name)
		b = binary.AppendUvarint(b, uint64(len(params[name])))
		for _, v := range params[name] {
			b = appendField(b, v)
		}
	}
	return b
}
