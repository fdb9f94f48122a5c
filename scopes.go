package idemkit

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// scopeSlots is the number of scopes a scopes cache remembers at most: a
// power of two, so that a hash picks a slot with a mask.
const scopeSlots = 256

// scopes remembers, for recently seen scopes, what composing a store key
// derives from the scope alone: the scope's digest text and the state of
// the key digest's SHA-256 after the scope's blocks. A scope (a principal)
// usually calls again, and both cost a SHA-256 block or more per call; a
// hit costs a hash of the scope and a string comparison.
//
// It is a direct-mapped table of immutable entries behind atomic
// pointers: lock-free, bounded (at most scopeSlots entries) and never
// wrong, since a slot is used only when its entry's scope equals the
// caller's. Two scopes that share a slot take turns in it.
type scopes struct {
	seed  maphash.Seed
	keys  *keyer      // the engine's secret (WithKeySecret), or nil
	none  *scopeEntry // the entry of calls without a scope
	slots [scopeSlots]atomic.Pointer[scopeEntry]
}

// A scopeEntry is what one scope derives. It is never changed after it
// is published.
type scopeEntry struct {
	scope string
	text  string // the scope segment of store keys: scopeDigestLen bytes of SHA-256(scope) (keyed: HMAC), base64url
	// state is the key digest's hash state after keyDigestPrefix(scope),
	// marshaled; with a secret, the HMAC's inner hash state after the
	// secret's inner pad block and keyDigestPrefix(scope).
	state []byte
}

func newScopes(k *keyer) *scopes {
	c := &scopes{seed: maphash.MakeSeed(), keys: k, none: unscoped}
	if k != nil {
		c.none = deriveScope(k, "")
	}
	return c
}

// unscoped is the entry of calls without a scope, which every engine
// without a secret shares.
var unscoped = deriveScope(nil, "")

// get returns scope's entry, deriving and publishing it on a miss.
func (c *scopes) get(scope string) *scopeEntry {
	if scope == "" {
		return c.none
	}
	slot := &c.slots[maphash.String(c.seed, scope)&(scopeSlots-1)]
	if e := slot.Load(); e != nil && e.scope == scope {
		return e
	}
	e := deriveScope(c.keys, scope)
	slot.Store(e)
	return e
}

// deriveScope computes a scope's entry. The entry keeps its own copy of
// scope: it outlives the call, and some callers pass strings over memory
// they reuse (fasthttp's request headers, converted without a copy), which
// would turn a kept alias into another principal's scope.
func deriveScope(k *keyer, scope string) *scopeEntry {
	scope = strings.Clone(scope)
	e := &scopeEntry{scope: scope, text: noScope}
	if scope != "" {
		e.text = k.scopeText(scope)
	}
	var from []byte // a fresh hash
	if k != nil {
		from = k.inner
	}
	e.state = stateAfter(from, keyDigestPrefix(scope))
	return e
}

// keyDigestPrefix returns what the key digest hashes before the key: the
// domain, the scope's length and the scope, zero-padded to whole SHA-256
// blocks, so that the hash state after it can be kept and resumed. The
// length keeps (scope, key) pairs apart.
func keyDigestPrefix(scope string) []byte {
	b := appendKeyDigestHead(nil, scope)
	if r := len(b) % sha256.BlockSize; r != 0 {
		b = append(b, make([]byte, sha256.BlockSize-r)...)
	}
	return b
}

// appendKeyDigestHead appends what every key digest input starts with:
// the domain, the scope's length (uvarint) and the scope. It is short so
// that a scope and key of up to 52 bytes together hash in one block.
func appendKeyDigestHead(b []byte, scope string) []byte {
	b = append(b, keyDigestDomain...)
	b = binary.AppendUvarint(b, uint64(len(scope)))
	return append(b, scope...)
}

// keyDigestHeadLen is len(appendKeyDigestHead(nil, scope)).
func keyDigestHeadLen(scope string) int {
	return len(keyDigestDomain) + uvarintLen(uint64(len(scope))) + len(scope)
}

// shortKeyInput is the longest unpadded key digest input that SHA-256
// hashes in one block (64 bytes less its 9 bytes of length padding).
const shortKeyInput = sha256.BlockSize - 9

// keyDigest returns the key digest of key in sc's scope. Without a
// secret (k nil), when domain, scope length, scope and key fit one
// SHA-256 block they are hashed as they are, in one call; otherwise the
// digest is SHA-256 of keyDigestPrefix(scope) and key, resumed from sc's
// saved state so that only the key's blocks are hashed. The first form is
// at most 55 bytes long and the second at least 65, so no input of one is
// an input of the other. With a secret, the digest is always
// HMAC-SHA-256 of keyDigestPrefix(scope) and key: the inner hash resumes
// from sc's saved state and the outer from k's, so a name costs the key's
// blocks and one outer block, never the pads or the scope again.
func keyDigest(k *keyer, sc *scopeEntry, key string) [sha256.Size]byte {
	if k == nil && keyDigestHeadLen(sc.scope)+len(key) <= shortKeyInput {
		var buf [shortKeyInput]byte
		return sha256.Sum256(append(appendKeyDigestHead(buf[:0], sc.scope), key...))
	}
	d := digests.Get().(*resumable)
	defer d.put()
	unmarshalState(d.h, sc.state)
	d.buf = append(d.buf[:0], key...)
	d.h.Write(d.buf)
	if k != nil {
		return k.finish(d)
	}
	d.buf = d.h.Sum(d.buf[:0])
	return [sha256.Size]byte(d.buf)
}

// A resumable is a SHA-256 hash and a buffer for its input and output,
// pooled: hashing through the hash.Hash interface would otherwise move
// both to the heap on every call.
type resumable struct {
	h   hash.Hash
	buf []byte
}

// put returns d to the pool, unless a long key grew its buffer.
func (d *resumable) put() {
	if cap(d.buf) <= 1024 {
		digests.Put(d)
	}
}

var digests = sync.Pool{New: func() any { return &resumable{h: sha256.New(), buf: make([]byte, 0, 128)} }}
