package keying

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/url"
	"slices"
	"sync"
)

// fingerprintDomain starts every fingerprint's hash input, naming the
// scheme and its version.
const fingerprintDomain = "idemkit/keying/fingerprint/v1\x00"

// Body kinds, hashed before the body so that a canonical JSON body and the
// same bytes hashed raw never collide.
const (
	bodyJSON byte = 'J'
	bodyRaw  byte = 'R'
)

// defaultVolatile lists the fields a Fingerprinter drops unless configured
// otherwise.
var defaultVolatile = []string{"traceId", "timestamp", "nonce", "sign", "random"}

// sortedDefaultVolatile is defaultVolatile sorted, as the zero
// Fingerprinter uses it.
var sortedDefaultVolatile = sortedSet(defaultVolatile)

// DefaultVolatile returns a new slice holding the JSON member names a
// Fingerprinter drops by default: traceId, timestamp, nonce, sign and random.
func DefaultVolatile() []string {
	return slices.Clone(defaultVolatile)
}

// config holds the settings Options change.
type config struct {
	volatile []string
}

// Option configures a Fingerprinter.
type Option func(*config)

// WithVolatile replaces the set of volatile JSON member names, those dropped
// at any depth before hashing, with fields. WithVolatile() with no fields
// drops nothing. Names match case-sensitively.
func WithVolatile(fields ...string) Option {
	fields = slices.Clone(fields)
	return func(c *config) { c.volatile = slices.Clone(fields) }
}

// WithExtraVolatile adds fields to the set of volatile JSON member names,
// which starts as DefaultVolatile.
func WithExtraVolatile(fields ...string) Option {
	fields = slices.Clone(fields)
	return func(c *config) { c.volatile = append(slices.Clip(c.volatile), fields...) }
}

// Fingerprinter computes request fingerprints. It is immutable once built
// and safe for concurrent use. The zero value behaves like
// NewFingerprinter() with no options.
type Fingerprinter struct {
	volatile   []string // sorted, without duplicates
	configured bool     // false for the zero value: use defaultVolatile
}

// NewFingerprinter returns a Fingerprinter. By default it drops the
// DefaultVolatile fields from JSON bodies; WithVolatile and
// WithExtraVolatile change that, applied in order.
func NewFingerprinter(opts ...Option) *Fingerprinter {
	c := config{volatile: DefaultVolatile()}
	for _, opt := range opts {
		opt(&c)
	}
	return &Fingerprinter{volatile: sortedSet(c.volatile), configured: true}
}

// sortedSet returns a sorted copy of names without duplicates.
func sortedSet(names []string) []string {
	s := slices.Clone(names)
	slices.Sort(s)
	return slices.Compact(s)
}

// Volatile returns a new slice holding the JSON member names f drops,
// sorted.
func (f *Fingerprinter) Volatile() []string {
	return slices.Clone(f.fields())
}

// fields returns the volatile names in effect.
func (f *Fingerprinter) fields() []string {
	if !f.configured {
		return sortedDefaultVolatile
	}
	return f.volatile
}

// Sum returns the fingerprint, as 64 lower-case hex digits of a SHA-256
// digest, of a request: its principal, its operation (a route pattern or
// RPC method name), the parameters that select what it acts on (query
// string or metadata; nil for none) and its body.
//
// A body that is a valid JSON value without duplicate member names is
// hashed in its canonical form (see Canonicalize) with f's volatile fields
// dropped, so bodies that differ only in member order, whitespace, number
// or string spelling, or volatile fields share a fingerprint. Any other
// body, including an empty one, is hashed as raw bytes, in a separate domain
// so that it never collides with a JSON body.
//
// Parameters are hashed with their names sorted and each name's values in
// the order given; a name with no values counts as absent. Every field is
// length-prefixed, so no bytes can move between fields without changing
// the fingerprint.
func (f *Fingerprinter) Sum(principal, operation string, params url.Values, body []byte) string {
	buf := canonPool.Get().(*[]byte)
	defer putCanonBuffer(buf)
	canon, err := canonicalize((*buf)[:0], body, f.fields())
	if err != nil {
		return fingerprint(principal, operation, params, bodyRaw, body)
	}
	*buf = canon
	return fingerprint(principal, operation, params, bodyJSON, canon)
}

// SumRaw is Sum without JSON detection: the body is always hashed as raw
// bytes, which suits deterministic binary encodings such as protobuf
// marshaled with Deterministic set. For a body that is not JSON, SumRaw and
// Sum agree.
func (f *Fingerprinter) SumRaw(principal, operation string, params url.Values, body []byte) string {
	return fingerprint(principal, operation, params, bodyRaw, body)
}

// canonPool recycles the buffers Sum writes canonical bodies into.
var canonPool = sync.Pool{New: func() any { return new([]byte) }}

// putCanonBuffer recycles buf unless it grew too large to keep.
func putCanonBuffer(buf *[]byte) {
	if cap(*buf) <= maxPooledBuffer {
		canonPool.Put(buf)
	}
}

// fingerprint hashes the framed fields of a request.
func fingerprint(principal, operation string, params url.Values, kind byte, body []byte) string {
	w := framer{h: sha256.New()}
	w.h.Write([]byte(fingerprintDomain))
	w.str(principal)
	w.str(operation)
	w.params(params)
	w.h.Write([]byte{kind})
	w.bytes(body)
	var sum [sha256.Size]byte
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], w.h.Sum(sum[:0]))
	return string(text[:])
}

// framer writes length-prefixed fields to a hash.
type framer struct {
	h   hash.Hash
	buf [8]byte
}

// count writes n as 8 big-endian bytes.
func (w *framer) count(n int) {
	binary.BigEndian.PutUint64(w.buf[:], uint64(n))
	w.h.Write(w.buf[:])
}

// str writes the length of s, then s.
func (w *framer) str(s string) {
	w.count(len(s))
	w.h.Write([]byte(s))
}

// bytes writes the length of b, then b.
func (w *framer) bytes(b []byte) {
	w.count(len(b))
	w.h.Write(b)
}

// params writes the number of names that have values, then each such name
// in sorted order followed by its count of values and the values in order.
func (w *framer) params(params url.Values) {
	names := make([]string, 0, len(params))
	for name, values := range params {
		if len(values) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	w.count(len(names))
	for _, name := range names {
		w.str(name)
		w.count(len(params[name]))
		for _, v := range params[name] {
			w.str(v)
		}
	}
}
