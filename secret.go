package idemkit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
)

// MinKeySecretLen is the shortest secret WithKeySecret takes, in bytes:
// HMAC-SHA-256's full strength needs 32 bytes of the secret's entropy.
const MinKeySecretLen = 32

// WithKeySecret makes the engine derive store key names, the fingerprints
// it stores and the key digests of its logs and errors with HMAC-SHA-256
// under secret, a deployment secret shared by every instance that uses
// the store (and by idemctl), instead of plain SHA-256. Without it,
// anyone who can list the store's keys, or read a log, can recover a
// guessable key or principal by hashing guesses; with it, nobody without
// the secret can. See the package documentation, section "Keys and
// scopes", for what each protects and how to change the secret.
//
// secret must hold at least MinKeySecretLen bytes (a random value, such
// as 32 bytes from crypto/rand, or the text of `openssl rand -base64 32`);
// a shorter or empty secret is an error wrapping ErrInvalid. The engine
// keeps its own copy. Engine-level only: a view (With) or a call given it
// is refused.
func WithKeySecret(secret []byte) Option {
	secret = append([]byte(nil), secret...) // the caller may reuse its buffer
	return func(c *config) error {
		c.set |= optSecret
		if len(secret) < MinKeySecretLen {
			return fmt.Errorf("WithKeySecret: the secret must have at least %d bytes, got %d", MinKeySecretLen, len(secret))
		}
		c.secret = secret
		return nil
	}
}

// Domains of the digests the engine derives, so that no two of them ever
// hash the same input.
const (
	scopeDigestDomain = "S\x02" // a keyed scope digest (an unkeyed one hashes the bare scope, as before)
	fpDomain          = "F\x01" // a stored fingerprint, keyed
	logDigestDomain   = "L\x01" // a key digest in logs and errors
	fpDigestLen       = 16      // bytes of a keyed stored fingerprint
	logDigestLen      = 6       // bytes of a log digest: 12 hex digits
)

// A keyer holds a deployment secret (WithKeySecret) as HMAC-SHA-256 wants
// it: the SHA-256 states after the key's inner and outer pad blocks, so
// that a digest resumes from them instead of hashing the pads on every
// call. A nil *keyer means no secret: digests are plain SHA-256.
type keyer struct {
	secret []byte
	inner  []byte // marshaled SHA-256 state after secret^ipad
	outer  []byte // marshaled SHA-256 state after secret^opad
}

func newKeyer(secret []byte) *keyer {
	if secret == nil {
		return nil
	}
	k := &keyer{secret: secret}
	key := secret
	if len(key) > sha256.BlockSize {
		s := sha256.Sum256(key)
		key = s[:]
	}
	var ipad, opad [sha256.BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	k.inner = stateAfter(nil, ipad[:])
	k.outer = stateAfter(nil, opad[:])
	return k
}

// stateAfter returns the marshaled SHA-256 state after hashing blocks
// (whole SHA-256 blocks), starting from state (nil: a fresh hash).
func stateAfter(state, blocks []byte) []byte {
	h := sha256.New()
	if state != nil {
		unmarshalState(h, state)
	}
	h.Write(blocks)
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("idemkit: sha256 state: " + err.Error()) // crypto/sha256 always marshals
	}
	return b
}

func unmarshalState(h hash.Hash, state []byte) {
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		panic("idemkit: sha256 state: " + err.Error()) // a state this package marshaled
	}
}

// mac returns HMAC-SHA-256 of the concatenated parts under k's secret,
// for digests off the hot path (scope digests, once per scope; log
// digests, only when a line is written).
func (k *keyer) mac(parts ...string) [sha256.Size]byte {
	m := hmac.New(sha256.New, k.secret)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return [sha256.Size]byte(m.Sum(nil))
}

// finish completes an HMAC whose inner hash has been resumed in d.h and
// fed the message: it returns the outer hash of the inner one, in d.buf.
func (k *keyer) finish(d *resumable) [sha256.Size]byte {
	d.buf = d.h.Sum(d.buf[:0])
	unmarshalState(d.h, k.outer)
	d.h.Write(d.buf)
	d.buf = d.h.Sum(d.buf[:0])
	return [sha256.Size]byte(d.buf)
}

// scopeText returns the scope segment of store keys for a non-empty scope.
func (k *keyer) scopeText(scope string) string {
	var s [sha256.Size]byte
	if k == nil {
		s = sha256.Sum256([]byte(scope))
	} else {
		s = k.mac(scopeDigestDomain, scope)
	}
	return base64.RawURLEncoding.EncodeToString(s[:scopeDigestLen])
}

// storedFingerprint returns what a record keeps of fingerprint: the
// fingerprint itself without a secret, and otherwise fpDigestLen bytes of
// its keyed digest, so that a record's value reveals no guessable
// fingerprint (a digest of the key, an HTTP request's) to whoever can read
// the store. An empty fingerprint stays empty.
func (k *keyer) storedFingerprint(fingerprint string) string {
	if k == nil || fingerprint == "" {
		return fingerprint
	}
	d := digests.Get().(*resumable)
	defer d.put()
	unmarshalState(d.h, k.inner)
	d.buf = append(append(d.buf[:0], fpDomain...), fingerprint...)
	d.h.Write(d.buf)
	sum := k.finish(d)
	return string(sum[:fpDigestLen])
}

// logDigest returns the short digest that names key, in scope, in logs
// and error texts: HMAC-SHA-256 under the secret when k is set, and plain
// SHA-256 otherwise, of a domain, the scope's length, the scope and the
// key.
func (k *keyer) logDigest(scope, key string) string {
	head := binary.AppendUvarint([]byte(logDigestDomain), uint64(len(scope)))
	var sum [sha256.Size]byte
	if k == nil {
		h := sha256.New()
		h.Write(head)
		h.Write([]byte(scope))
		h.Write([]byte(key))
		sum = [sha256.Size]byte(h.Sum(nil))
	} else {
		sum = k.mac(string(head), scope, key)
	}
	return hex.EncodeToString(sum[:logDigestLen])
}

// KeyDigest returns the digest that names key (in the scope given with
// WithScope) in the engine's logs, events and error texts, as
// Event.KeyDigest does: keyed with the engine's secret (WithKeySecret)
// when it has one. Tools such as idemctl print it to match a key to log
// lines without showing the key. It returns an error wrapping ErrInvalid
// for an option other than WithScope.
func (e *Engine) KeyDigest(key string, opts ...Option) (string, error) {
	_, scope, err := e.callConfigFor("KeyDigest", inspectOpts, opts)
	if err != nil {
		return "", err
	}
	return e.keys.logDigest(scope, key), nil
}
