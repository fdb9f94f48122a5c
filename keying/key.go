package keying

import (
	"crypto/sha256"
	"encoding/base64"
)

// Encoding of a part inside a key; see the package documentation, section
// "Key encoding", for the rules.
const (
	separator     = ':' // between parts
	escapeByte    = '%' // starts a %XX escape inside a literal part
	digestMarker  = '#' // starts the digest form of a part
	emptyPart     = "%" // the whole encoding of the empty part
	maxLiteralLen = 48  // longest literal (escaped) form of a part, in bytes
	digestBytes   = 24  // digest bits kept: 192
	hexDigits     = "0123456789ABCDEF"
)

// Domain-separation prefixes for the digests this file computes.
const (
	partDomain   = "idemkit/keying/part\x00"
	hiddenPrefix = "\x00idemkit/keying/hidden\x00"
)

// digestPartLen is the length of a part's digest form: the marker and the
// unpadded base64url text of digestBytes bytes.
var digestPartLen = 1 + base64.RawURLEncoding.EncodedLen(digestBytes)

// Key composes an unambiguous, bounded store key from parts. It is a pure
// function, safe for concurrent use. Different part lists always give
// different keys (up to SHA-256 collisions); short printable parts stay
// readable, and any other part is written as a 33-byte digest. A key of n
// parts is at most 49n-1 bytes long and never contains '{' or '}', so no
// part can inject a Redis Cluster hash tag. Key with no parts returns "",
// which no store accepts. See the package documentation, section "Key
// encoding", for the exact encoding.
func Key(parts ...string) string {
	if len(parts) == 0 {
		return ""
	}
	n := len(parts) - 1
	for _, p := range parts {
		n += encodedLen(p)
	}
	var stack [256]byte // most keys fit: one allocation, the string
	buf := stack[:0]
	if n > len(stack) {
		buf = make([]byte, 0, n)
	}
	return string(AppendKey(buf, parts...))
}

// AppendKey appends Key(parts...) to dst and returns the extended buffer,
// so that a key can be built next to other text without a string of its
// own. It keeps no reference to parts after it returns, so they may be
// views of memory the caller reuses.
func AppendKey(dst []byte, parts ...string) []byte {
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, separator)
		}
		dst = appendPart(dst, p)
	}
	return dst
}

// Hidden marks a sensitive part, such as a bearer token or an e-mail
// address, so that Key stores only a digest of it. The result holds a
// SHA-256 digest of s, never s itself, and always contains a byte outside
// printable ASCII, so Key always writes it in digest form: Hidden(s) can
// never appear in a key as a literal part, and Key(Hidden(s)) differs from
// Key(s). Hidden is not a password hash: a low-entropy secret can be
// recovered from its digest by guessing.
func Hidden(s string) string {
	h := sha256.New()
	h.Write([]byte(hiddenPrefix))
	h.Write([]byte(s))
	return hiddenPrefix + string(h.Sum(nil))
}

// encodedLen returns the length of p's encoded form inside a key.
func encodedLen(p string) int {
	if p == "" {
		return len(emptyPart)
	}
	if n := literalLen(p); n >= 0 {
		return n
	}
	return digestPartLen
}

// appendPart appends p's encoded form to b.
func appendPart(b []byte, p string) []byte {
	if p == "" {
		return append(b, emptyPart...)
	}
	switch n := literalLen(p); {
	case n == len(p): // nothing to escape
		return append(b, p...)
	case n >= 0:
		return appendLiteral(b, p)
	default:
		return appendDigest(b, p)
	}
}

// literalLen returns the length of p's escaped literal form, or -1 when p
// holds a byte outside printable ASCII or its literal form would be longer
// than maxLiteralLen.
func literalLen(p string) int {
	if len(p) > maxLiteralLen {
		return -1
	}
	if allMarked(p, &plainByte) { // the common case: UUIDs, base64url
		return len(p)
	}
	n := 0
	for i := 0; i < len(p); i++ {
		w := literalWidth[p[i]]
		if w == 0 {
			return -1
		}
		n += int(w)
	}
	if n > maxLiteralLen {
		return -1
	}
	return n
}

// plainByte is 1 for the bytes a literal part holds as they are (width
// 1), 0 for the others: numbers, for allMarked.
var plainByte = func() (t [256]byte) {
	for c, w := range literalWidth {
		if w == 1 {
			t[c] = 1
		}
	}
	return t
}()

// literalWidth maps each byte to the length of its form inside a literal
// part: 1 for printable ASCII written as is, 3 for bytes written as %XX,
// and 0 for bytes that force the digest form.
var literalWidth = func() (w [256]byte) {
	for c := 0x20; c <= 0x7e; c++ {
		w[c] = 1
	}
	for _, c := range []byte{escapeByte, separator, digestMarker, '{', '}', ' '} {
		w[c] = 3
	}
	return w
}()

// appendLiteral appends the escaped literal form of the printable part p.
func appendLiteral(b []byte, p string) []byte {
	run := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if literalWidth[c] != 3 {
			continue
		}
		b = append(b, p[run:i]...)
		b = append(b, escapeByte, hexDigits[c>>4], hexDigits[c&0x0f])
		run = i + 1
	}
	return append(b, p[run:]...)
}

// appendDigest appends the digest form of p.
func appendDigest(b []byte, p string) []byte {
	var stack [256]byte // most parts fit: hash them without a heap copy
	sum := sha256.Sum256(append(append(stack[:0], partDomain...), p...))
	b = append(b, digestMarker)
	return base64.RawURLEncoding.AppendEncode(b, sum[:digestBytes])
}
