package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/golang-jwt/jwt/v5"
	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// principalFunc identifies the caller of a request, or returns an error
// wrapping idemhttp.ErrNoPrincipal (answered with 401).
type principalFunc func(*http.Request) (string, error)

// newPrincipal returns the principal function the configuration names,
// and what reloads its key files (a no-op for sources without keys).
func newPrincipal(c principalCfg) (principalFunc, func() error, error) {
	noReload := func() error { return nil }
	switch c.Source {
	case sourceHeader:
		return idemhttp.TrustedHeaderPrincipal(c.Header), noReload, nil
	case sourceJWT:
		v, err := newJWTVerifier(c.JWT)
		if err != nil {
			return nil, nil, err
		}
		return v.principal, v.reload, nil
	case sourceMTLS:
		return mtlsPrincipal, noReload, nil
	}
	return func(*http.Request) (string, error) {
		return "", fmt.Errorf("%w: no principal source configured", idemhttp.ErrNoPrincipal)
	}, noReload, nil
}

// mtlsPrincipal is the subject of the verified client certificate. Only a
// chain the server verified against client_ca_file counts.
func mtlsPrincipal(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", fmt.Errorf("%w: no verified client certificate", idemhttp.ErrNoPrincipal)
	}
	subject := r.TLS.VerifiedChains[0][0].Subject.String()
	if subject == "" {
		return "", fmt.Errorf("%w: client certificate without a subject", idemhttp.ErrNoPrincipal)
	}
	return subject, nil
}

// jwtVerifier verifies bearer tokens and reads the principal claim. Its
// keys can be reloaded from their files (SIGHUP) while it serves.
type jwtVerifier struct {
	cfg    jwtCfg
	parser *jwt.Parser
	claim  string
	keys   atomic.Pointer[keySet]
}

// keySet is the key material of a verifier, replaced whole on reload.
type keySet struct {
	hmac []byte
	keys []verifyKey
}

// verifyKey is a public key, with its key ID when a JWKS gave one.
type verifyKey struct {
	kid string
	key any // *rsa.PublicKey or *ecdsa.PublicKey
}

// minHMACKey is the shortest HS256 secret accepted: the hash's output
// size, as RFC 7518 section 3.2 requires.
const minHMACKey = 32

func newJWTVerifier(c jwtCfg) (*jwtVerifier, error) {
	v := &jwtVerifier{cfg: c, claim: c.Claim}
	if v.claim == "" {
		v.claim = "sub"
	}
	if err := v.reload(); err != nil {
		return nil, err
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(c.Algorithms), jwt.WithExpirationRequired(), jwt.WithLeeway(c.Leeway.Duration)}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// reload reads the key files again and, when they hold a key for every
// configured algorithm, puts them in place of the current keys; otherwise
// the current keys stay.
func (v *jwtVerifier) reload() error {
	ks, err := loadKeys(v.cfg)
	if err != nil {
		return err
	}
	for _, a := range v.cfg.Algorithms {
		if a == "HS256" && ks.hmac == nil {
			return fmt.Errorf("%w: principal.jwt: HS256 needs hmac_key_file", errConfig)
		}
		if (a == "RS256" || a == "ES256") && !ks.has(a) {
			return fmt.Errorf("%w: principal.jwt: %s needs a matching key in public_key_file or jwks_file", errConfig, a)
		}
	}
	v.keys.Store(ks)
	return nil
}

func loadKeys(c jwtCfg) (*keySet, error) {
	ks := new(keySet)
	if c.HMACKeyFile != "" {
		b, err := readSecretFile("principal.jwt.hmac_key_file", c.HMACKeyFile)
		if err != nil {
			return nil, err
		}
		b = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(b) < minHMACKey {
			return nil, fmt.Errorf("%w: principal.jwt.hmac_key_file: the secret has %d bytes, at least %d are required", errConfig, len(b), minHMACKey)
		}
		ks.hmac = b
	}
	if c.PublicKeyFile != "" {
		b, err := readSecretFile("principal.jwt.public_key_file", c.PublicKeyFile)
		if err != nil {
			return nil, err
		}
		k, err := parsePublicKeyPEM(b)
		if err != nil {
			return nil, fmt.Errorf("%w: principal.jwt.public_key_file: %v", errConfig, err)
		}
		ks.keys = append(ks.keys, verifyKey{key: k})
	}
	if c.JWKSFile != "" {
		b, err := readSecretFile("principal.jwt.jwks_file", c.JWKSFile)
		if err != nil {
			return nil, err
		}
		keys, err := parseJWKS(b)
		if err != nil {
			return nil, fmt.Errorf("%w: principal.jwt.jwks_file: %v", errConfig, err)
		}
		ks.keys = append(ks.keys, keys...)
	}
	return ks, nil
}

func (ks *keySet) has(alg string) bool {
	for _, k := range ks.keys {
		if keyFits(alg, k.key) {
			return true
		}
	}
	return false
}

// keyFits reports whether key verifies alg: an RSA key for RS256, a P-256
// key for ES256. Each algorithm gets only its own kind of key, so a token
// cannot pick the algorithm that reads a public key as an HMAC secret.
func keyFits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == "RS256"
	case *ecdsa.PublicKey:
		return alg == "ES256" && k.Curve == elliptic.P256()
	}
	return false
}

var errNoKey = errors.New("no key for this token")

// keyFor is the jwt.Keyfunc: the HMAC secret for HS256, else the public
// key that fits the algorithm (and the kid, when the token names one).
func (v *jwtVerifier) keyFor(t *jwt.Token) (any, error) {
	ks := v.keys.Load()
	alg := t.Method.Alg()
	if alg == "HS256" {
		if ks.hmac == nil {
			return nil, errNoKey
		}
		return ks.hmac, nil
	}
	kid, _ := t.Header["kid"].(string)
	var found []jwt.VerificationKey
	for _, k := range ks.keys {
		if keyFits(alg, k.key) && (kid == "" || k.kid == "" || k.kid == kid) {
			found = append(found, k.key)
		}
	}
	switch len(found) {
	case 0:
		return nil, errNoKey
	case 1:
		return found[0], nil
	}
	return jwt.VerificationKeySet{Keys: found}, nil
}

// principal reads and verifies the bearer token of r, and returns its
// principal: the configured claim when an issuer is pinned, otherwise the
// token's issuer and that claim together (see issuerPrincipal), so that
// the same subject from two issuers whose keys the proxy holds names two
// callers. A token whose header has crit (RFC 7515 section 4.1.11: the
// proxy understands no extension) or whose header or claims name a member
// twice is refused.
func (v *jwtVerifier) principal(r *http.Request) (string, error) {
	h := r.Header.Values("Authorization")
	if len(h) != 1 {
		return "", fmt.Errorf("%w: one Authorization header required", idemhttp.ErrNoPrincipal)
	}
	scheme, raw, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
		return "", fmt.Errorf("%w: Authorization is not a bearer token", idemhttp.ErrNoPrincipal)
	}
	if err := checkJOSE(raw); err != nil {
		return "", fmt.Errorf("%w: %v", idemhttp.ErrNoPrincipal, err)
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(raw, claims, v.keyFor); err != nil {
		// The jwt error says why (expired, bad signature, ...) without
		// quoting the token.
		return "", fmt.Errorf("%w: %v", idemhttp.ErrNoPrincipal, err)
	}
	p, ok := claims[v.claim].(string)
	if !ok || p == "" {
		return "", fmt.Errorf("%w: the token has no string claim %q", idemhttp.ErrNoPrincipal, v.claim)
	}
	if v.cfg.Issuer != "" {
		return p, nil // the parser checked iss
	}
	iss := ""
	if c, present := claims["iss"]; present {
		if iss, ok = c.(string); !ok {
			return "", fmt.Errorf("%w: the token's iss is not a string", idemhttp.ErrNoPrincipal)
		}
	}
	return issuerPrincipal(iss, p), nil
}

// maxJSONDepth bounds the nesting of a token's header and claims.
const maxJSONDepth = 32

// checkJOSE refuses what the jwt package would accept silently: a crit
// header, and a member named twice in the header, the claims or any object
// inside them (encoding/json keeps the last). A token that is not three
// base64url parts is left to the parser, which refuses it. Errors name no
// part of the token but a member name.
func checkJOSE(raw string) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil
	}
	header, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	claims, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	if errors.Join(err1, err2) != nil {
		return nil
	}
	if err := uniqueMembers(header); err != nil {
		return fmt.Errorf("token header: %w", err)
	}
	if err := uniqueMembers(claims); err != nil {
		return fmt.Errorf("token claims: %w", err)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(header, &h); err != nil {
		return fmt.Errorf("token header: %w", err)
	}
	if _, ok := h["crit"]; ok {
		return errors.New("the token header has crit: this proxy understands no JWS extension (RFC 7515 section 4.1.11)")
	}
	return nil
}

// uniqueMembers reports the first member name that an object of the JSON
// document b repeats (after unescaping).
func uniqueMembers(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return uniqueIn(dec, 0)
}

// uniqueIn reads one JSON value from dec, checking every object in it.
func uniqueIn(dec *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested over %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := k.(string) // an object's keys are strings
			if seen[name] {
				return fmt.Errorf("duplicate member %.64q", name)
			}
			seen[name] = true
			if err := uniqueIn(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		for dec.More() {
			if err := uniqueIn(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}

// parsePublicKeyPEM reads the first PUBLIC KEY or CERTIFICATE block of b.
func parsePublicKeyPEM(b []byte) (any, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PUBLIC KEY or CERTIFICATE PEM block")
		}
		var key any
		var err error
		switch blk.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(blk.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(blk.Bytes); err == nil {
				key = cert.PublicKey
			}
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		switch key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey:
			return key, nil
		}
		return nil, fmt.Errorf("unsupported key type %T (RSA or ECDSA P-256)", key)
	}
}

// jwk is the part of an RFC 7517 JSON Web Key read here.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads the RSA and EC P-256 signing keys of a JWKS document.
// Other key types are refused, not skipped: a JWKS meant for this proxy
// should hold only keys it can use.
func parseJWKS(b []byte) ([]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, err
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("no keys")
	}
	out := make([]verifyKey, 0, len(set.Keys))
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %v", i, k.Kid, err)
		}
		out = append(out, verifyKey{kid: k.Kid, key: key})
	}
	return out, nil
}

func (k jwk) publicKey() (any, error) {
	switch k.Kty {
	case "RSA":
		n, err1 := b64int(k.N)
		e, err2 := b64int(k.E)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		if n.BitLen() < 2048 || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 {
			return nil, errors.New("RSA key under 2048 bits or with a bad exponent")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q (P-256 only)", k.Crv)
		}
		x, err1 := base64.RawURLEncoding.DecodeString(k.X)
		y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
		if errors.Join(err1, err2) != nil || len(x) != 32 || len(y) != 32 {
			return nil, errors.New("x and y must be 32-byte base64url coordinates")
		}
		// The parser checks that the point is on the curve.
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, errors.New("EC point not on P-256")
		}
		return pub, nil
	}
	return nil, fmt.Errorf("key type %q (RSA or EC only)", k.Kty)
}

func b64int(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("bad base64url integer")
	}
	return new(big.Int).SetBytes(b), nil
}

// issuerPrincipal is the principal of claim value p in a token of issuer
// iss when no issuer is pinned: the JSON array [iss, p], e.g.
// ["https://issuer.test","alice"]. JSON encodes each string whole, quotes
// and all, so no two pairs give the same principal, whatever characters
// they hold.
func issuerPrincipal(iss, p string) string {
	b, _ := json.Marshal([2]string{iss, p}) // strings always marshal
	return string(b)
}
