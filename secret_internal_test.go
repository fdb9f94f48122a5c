package idemkit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// hmacOf is HMAC-SHA-256 of the concatenated parts under secret, by
// crypto/hmac: the reference the engine's resumed states must match.
func hmacOf(secret []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// TestKeyedDigestsAreHMAC: the keyed key digest, resumed from cached
// inner and outer states, is HMAC-SHA-256 of keyDigestPrefix(scope) and
// the key under the secret, for keys and scopes of every length around
// the block sizes, and for secrets shorter and longer than a block; the
// scope segment, the stored fingerprint and the log digest are the HMACs
// of their domains.
func TestKeyedDigestsAreHMAC(t *testing.T) {
	secrets := [][]byte{
		[]byte(strings.Repeat("s", MinKeySecretLen)),
		[]byte(strings.Repeat("t", sha256.BlockSize)),
		[]byte(strings.Repeat("u", sha256.BlockSize+1)), // hashed first, as HMAC does
	}
	for _, secret := range secrets {
		k := newKeyer(secret)
		c := newScopes(k)
		for _, scope := range []string{"", "alice", "bob@example.com", strings.Repeat("p", 70)} {
			sc := c.get(scope)
			if sc != c.get(scope) && scope != "" {
				t.Fatalf("scope %q not cached", scope)
			}
			for n := range 140 {
				key := strings.Repeat("k", n)
				got := keyDigest(k, sc, key)
				want := hmacOf(secret, string(keyDigestPrefix(scope)), key)
				if string(got[:]) != string(want) {
					t.Fatalf("secret %d bytes, scope %q, key of %d bytes: digest %x, want HMAC %x", len(secret), scope, n, got, want)
				}
			}
			if scope != "" {
				want := hmacOf(secret, scopeDigestDomain, scope)
				if sc.text != b64(want[:scopeDigestLen]) {
					t.Fatalf("scope text %s, want %s", sc.text, b64(want[:scopeDigestLen]))
				}
			}
			head := string(binary.AppendUvarint([]byte(logDigestDomain), uint64(len(scope))))
			if got, want := k.logDigest(scope, "order-1"), hex.EncodeToString(hmacOf(secret, head, scope, "order-1")[:logDigestLen]); got != want {
				t.Fatalf("log digest %s, want %s", got, want)
			}
		}
		for _, fp := range []string{"x", strings.Repeat("f", 64), strings.Repeat("g", 200)} {
			if got, want := k.storedFingerprint(fp), string(hmacOf(secret, fpDomain, fp)[:fpDigestLen]); got != want {
				t.Fatalf("stored fingerprint %x, want %x", got, want)
			}
		}
		if k.storedFingerprint("") != "" {
			t.Fatal("an empty fingerprint must stay empty")
		}
	}
}

// TestUnkeyedDigestsAreSHA256: without a secret the key digest is the
// layout it was (SHA-256, see keyDigest), the stored fingerprint is the
// fingerprint, and the log digest is SHA-256 over its domain and the
// scope.
func TestUnkeyedDigestsAreSHA256(t *testing.T) {
	var k *keyer
	c := newScopes(nil)
	for _, scope := range []string{"", "alice"} {
		for _, key := range []string{"order-1", strings.Repeat("k", 100)} {
			in := string(appendKeyDigestHead(nil, scope)) + key
			if keyDigestHeadLen(scope)+len(key) > shortKeyInput {
				in = string(keyDigestPrefix(scope)) + key
			}
			if got, want := keyDigest(k, c.get(scope), key), sha256.Sum256([]byte(in)); got != want {
				t.Fatalf("scope %q key %q: %x, want %x", scope, key, got, want)
			}
		}
	}
	if k.storedFingerprint("fp") != "fp" {
		t.Fatal("without a secret the fingerprint is stored as given")
	}
	sum := sha256.Sum256([]byte(logDigestDomain + "\x05alice" + "order-1"))
	if got := k.logDigest("alice", "order-1"); got != hex.EncodeToString(sum[:logDigestLen]) {
		t.Fatalf("log digest %s", got)
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
