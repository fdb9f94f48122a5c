package idemkit

import (
	"fmt"

	"github.com/idemkit/idemkit/internal/b64url"
	"github.com/idemkit/idemkit/internal/layout"
	"github.com/idemkit/idemkit/keying"
)

const (
	spaceGuard = iota
	spaceDo
	spaceToken
)

// Store key layout: <namespace>:<space>:<scope>:<key>. By default the scope
// is the first 72 bits of a digest of the caller's scope ("-" without one)
// and the key the first 128 bits of a digest of scope and key together,
// both unpadded base64url: nothing a caller passes (principals, tokens,
// idempotency keys) is readable in a store's key names. The digests are
// SHA-256, or HMAC-SHA-256 under the engine's key secret (WithKeySecret),
// without which a guessable key or scope can be found by hashing guesses.
// WithReadableKeys writes both with keying.Key instead, for debugging.
//
// The lengths keep a name with the default namespace at 42 bytes, under
// the 44 up to which Redis keeps a string in one allocation with its
// object header: a 67-byte name cost Redis 0.7k more instructions per
// replay and 2.9k per first execution than a 42-byte one (KEYLEN=67 and
// KEYLEN=42 CALLGRIND=1 OPS=2000 ./bench/redis-work.sh). 128 bits keep
// accidental collisions out of reach (about 2^64 keys for even odds), and
// a key digest covers its scope, so a caller can only collide with its
// own keys.
const (
	noScope         = "-"
	scopeDigestLen  = 9       // bytes: 12 base64url characters
	keyDigestLen    = 16      // bytes: 22 base64url characters
	keyDigestDomain = "K\x02" // a store key digest, version 2
)

// storeKey maps a caller's key in a scope into one of the engine's key
// spaces.
func (e *Engine) storeKey(cfg *config, scope string, space int, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("idemkit: %w: empty key", ErrInvalid)
	}
	return e.composeKey(cfg, space, scope, key), nil
}

func (e *Engine) composeKey(cfg *config, space int, scope, key string) string {
	p := e.prefix[space]
	if cfg.readable {
		s := noScope
		if scope != "" {
			s = keying.Key(scope)
		}
		return p + s + ":" + keying.Key(key)
	}
	sc := e.scopes.get(scope)
	var buf [128]byte // the name is built without a heap copy
	out := append(append(append(buf[:0], p...), sc.text...), ':')
	sum := keyDigest(e.scopes.keys, sc, key)
	return string(b64url.Append16(out, [keyDigestLen]byte(sum[:keyDigestLen])))
}

// ScopeOf returns the scope segment of a store key the engine wrote: the
// same text for every key of one scope (WithScope), in every mode, and "-"
// for keys written without a scope. It returns "" for a key the engine did
// not write. Stores that keep per-scope quotas take it as their scope
// function, so one principal's flood cannot push out another's records.
func ScopeOf(storeKey string) string {
	return layout.ScopeOf(storeKey)
}
