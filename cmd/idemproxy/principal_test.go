package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// jwtKeys are the keys of the JWT tests, written to files.
type jwtKeys struct {
	rsa                    *rsa.PrivateKey
	ec                     *ecdsa.PrivateKey
	hmac                   []byte
	rsaPEM, jwks, hmacFile string
	rsaPublicPEM           []byte
}

func newJWTKeys(t *testing.T) *jwtKeys {
	t.Helper()
	dir := t.TempDir()
	k := &jwtKeys{hmac: []byte(strings.Repeat("s3cret-", 6))}
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	k.rsaPublicPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	k.rsaPEM = writeFile(t, dir, "rsa.pem", k.rsaPublicPEM)
	k.hmacFile = writeFile(t, dir, "hmac.key", append(k.hmac, '\n'))
	ecdh, _ := k.ec.PublicKey.ECDH()
	raw := ecdh.Bytes() // 0x04 || X || Y
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "EC", "crv": "P-256", "kid": "ec1", "use": "sig", "x": b64(raw[1:33]), "y": b64(raw[33:])},
		{"kty": "RSA", "kid": "rsa1", "n": b64(k.rsa.N.Bytes()), "e": b64(big.NewInt(int64(k.rsa.E)).Bytes())},
	}})
	k.jwks = writeFile(t, dir, "jwks.json", jwks)
	return k
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bearer(tok string) *http.Request {
	r := httptest.NewRequest("POST", "/orders", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

func claims(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "tenant": "t-" + sub, "iss": "https://issuer.test", "exp": time.Now().Add(time.Hour).Unix()}
}

func TestJWTPrincipal(t *testing.T) {
	k := newJWTKeys(t)
	v, err := newJWTVerifier(jwtCfg{
		Algorithms: []string{"HS256", "RS256", "ES256"}, HMACKeyFile: k.hmacFile,
		PublicKeyFile: k.rsaPEM, JWKSFile: k.jwks, Issuer: "https://issuer.test",
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := []struct{ name, tok string }{
		{"HS256", sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice"), "")},
		{"RS256 from the PEM file", sign(t, jwt.SigningMethodRS256, k.rsa, claims("alice"), "")},
		{"RS256 by kid", sign(t, jwt.SigningMethodRS256, k.rsa, claims("alice"), "rsa1")},
		{"ES256 from the JWKS", sign(t, jwt.SigningMethodES256, k.ec, claims("alice"), "ec1")},
	}
	for _, tc := range ok {
		if p, err := v.principal(bearer(tc.tok)); err != nil || p != "alice" {
			t.Errorf("%s: principal %q, %v", tc.name, p, err)
		}
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	expired := claims("alice")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	noExp := claims("alice")
	delete(noExp, "exp")
	wrongIss := claims("alice")
	wrongIss["iss"] = "https://evil.test"
	noSub := claims("")
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("alice"), "")
	// Algorithm confusion: an HS256 token whose secret is the RSA public
	// key the proxy holds.
	confused := sign(t, jwt.SigningMethodHS256, k.rsaPublicPEM, claims("mallory"), "")
	bad := []struct{ name, tok string }{
		{"alg none", noneTok},
		{"HS256 keyed with the RSA public key", confused},
		{"RS256 by another key", sign(t, jwt.SigningMethodRS256, other, claims("alice"), "")},
		{"ES256 under an RSA kid", sign(t, jwt.SigningMethodES256, k.ec, claims("alice"), "rsa1")},
		{"RS384 not allowed", sign(t, jwt.SigningMethodRS384, k.rsa, claims("alice"), "")},
		{"expired", sign(t, jwt.SigningMethodHS256, k.hmac, expired, "")},
		{"no exp", sign(t, jwt.SigningMethodHS256, k.hmac, noExp, "")},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, k.hmac, wrongIss, "")},
		{"empty sub", sign(t, jwt.SigningMethodHS256, k.hmac, noSub, "")},
		{"garbage", "a.b.c"},
	}
	for _, tc := range bad {
		p, err := v.principal(bearer(tc.tok))
		if !errors.Is(err, idemhttp.ErrNoPrincipal) {
			t.Errorf("%s: principal %q, err %v; want ErrNoPrincipal", tc.name, p, err)
		}
		if err != nil && strings.Contains(err.Error(), tc.tok) {
			t.Errorf("%s: the error quotes the token", tc.name)
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Basic YTpi")
	if _, err := v.principal(r); !errors.Is(err, idemhttp.ErrNoPrincipal) {
		t.Errorf("basic auth: %v", err)
	}
}

func TestJWTConfiguredClaim(t *testing.T) {
	k := newJWTKeys(t)
	v, err := newJWTVerifier(jwtCfg{Algorithms: []string{"RS256"}, PublicKeyFile: k.rsaPEM, Claim: "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	// No issuer is pinned: the claim is scoped by the token's issuer.
	want := issuerPrincipal("https://issuer.test", "t-alice")
	if p, err := v.principal(bearer(sign(t, jwt.SigningMethodRS256, k.rsa, claims("alice"), ""))); err != nil || p != want {
		t.Fatalf("principal %q, %v; want %q", p, err, want)
	}
	// Only RS256 is configured: an HS256 token is refused even though
	// it is well formed.
	if _, err := v.principal(bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice"), ""))); err == nil {
		t.Fatal("HS256 token accepted by an RS256-only verifier")
	}
	// Algorithm confusion: HS256 keyed with the very public key the
	// verifier holds.
	if _, err := v.principal(bearer(sign(t, jwt.SigningMethodHS256, k.rsaPublicPEM, claims("alice"), ""))); err == nil {
		t.Fatal("HS256 token keyed with the RSA public key accepted")
	}
}

func TestJWTConfigErrors(t *testing.T) {
	k := newJWTKeys(t)
	short := writeFile(t, t.TempDir(), "short.key", []byte("too-short"))
	for name, c := range map[string]jwtCfg{
		"HS256 without secret": {Algorithms: []string{"HS256"}, PublicKeyFile: k.rsaPEM},
		"short secret":         {Algorithms: []string{"HS256"}, HMACKeyFile: short},
		"ES256 without EC key": {Algorithms: []string{"ES256"}, PublicKeyFile: k.rsaPEM},
		"missing file":         {Algorithms: []string{"RS256"}, PublicKeyFile: "/nonexistent.pem"},
		"secret as PEM":        {Algorithms: []string{"RS256"}, PublicKeyFile: k.hmacFile},
	} {
		if _, err := newJWTVerifier(c); !errors.Is(err, errConfig) {
			t.Errorf("%s: %v, want errConfig", name, err)
		} else if strings.Contains(err.Error(), string(k.hmac)) {
			t.Errorf("%s: the error shows the secret", name)
		}
	}
}

func TestMTLSPrincipal(t *testing.T) {
	ca, caKey := newCert(t, "test CA", nil, nil)
	client, clientKey := newCert(t, "alice", ca, caKey)
	server, serverKey := newCert(t, "127.0.0.1", ca, caKey)
	dir := t.TempDir()
	pemOf := func(c *x509.Certificate) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	keyOf := func(k *ecdsa.PrivateKey) []byte {
		der, _ := x509.MarshalPKCS8PrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	tc, err := tlsConfig(tlsCfg{
		CertFile: writeFile(t, dir, "server.pem", pemOf(server)), KeyFile: writeFile(t, dir, "server.key", keyOf(serverKey)),
		ClientCAFile: writeFile(t, dir, "ca.pem", pemOf(ca)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := mtlsPrincipal(r)
		if err != nil {
			http.Error(w, "no principal", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(p))
	}))
	srv.TLS = tc
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	get := func(certs []tls.Certificate) (int, string) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		res, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b := make([]byte, 256)
		n, _ := res.Body.Read(b)
		return res.StatusCode, string(b[:n])
	}
	if code, body := get([]tls.Certificate{{Certificate: [][]byte{client.Raw}, PrivateKey: clientKey}}); code != 200 || body != "CN=alice" {
		t.Fatalf("with a client certificate: %d %q", code, body)
	}
	if code, _ := get(nil); code != http.StatusUnauthorized {
		t.Fatalf("without a client certificate: %d", code)
	}
}

// newCert makes a certificate for cn, self-signed when parent is nil.
func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if cn == "127.0.0.1" {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func TestJWKSReloadRotatesKeysAndAFailedReloadKeepsThem(t *testing.T) {
	old, rotated := newJWTKeys(t), newJWTKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	copyFile := func(from string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(old.jwks)
	v, err := newJWTVerifier(jwtCfg{Algorithms: []string{"ES256"}, JWKSFile: path})
	if err != nil {
		t.Fatal(err)
	}
	oldTok := sign(t, jwt.SigningMethodES256, old.ec, claims("alice"), "ec1")
	newTok := sign(t, jwt.SigningMethodES256, rotated.ec, claims("alice"), "ec1")
	check := func(when string, oldOK, newOK bool) {
		t.Helper()
		if _, err := v.principal(bearer(oldTok)); (err == nil) != oldOK {
			t.Errorf("%s: old key accepted %v, want %v", when, err == nil, oldOK)
		}
		if _, err := v.principal(bearer(newTok)); (err == nil) != newOK {
			t.Errorf("%s: new key accepted %v, want %v", when, err == nil, newOK)
		}
	}
	check("before the rotation", true, false)
	copyFile(rotated.jwks)
	check("rotated file, not reloaded", true, false)
	if err := v.reload(); err != nil {
		t.Fatal(err)
	}
	check("after the reload", false, true)
	if err := os.WriteFile(path, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.reload(); !errors.Is(err, errConfig) {
		t.Fatalf("reload of an empty JWKS: %v", err)
	}
	check("after a failed reload", false, true)
}

// signRaw signs header and claims, given as JSON text, with HS256: the
// tests below need members the jwt package would not write (a repeated
// name, a crit header).
func signRaw(t *testing.T, key []byte, header, claims string) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(header)) + "." + enc([]byte(claims))
	sig, err := jwt.SigningMethodHS256.Sign(signing, key)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + enc(sig)
}

// hsVerifier is an HS256 verifier over k's secret, its issuer pinned or
// not.
func hsVerifier(t *testing.T, k *jwtKeys, issuer string) *jwtVerifier {
	t.Helper()
	v, err := newJWTVerifier(jwtCfg{Algorithms: []string{"HS256"}, HMACKeyFile: k.hmacFile, Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestJWTCritHeader: RFC 7515 section 4.1.11 makes a recipient that does
// not understand an extension crit names reject the token. The proxy
// understands none.
func TestJWTCritHeader(t *testing.T) {
	k := newJWTKeys(t)
	v := hsVerifier(t, k, "")
	exp := time.Now().Add(time.Hour).Unix()
	body := `{"sub":"alice","iss":"https://issuer.test","exp":` + strconv.FormatInt(exp, 10) + `}`
	if _, err := v.principal(bearer(signRaw(t, k.hmac, `{"alg":"HS256","typ":"JWT"}`, body))); err != nil {
		t.Fatalf("the same token without crit: %v", err)
	}
	for name, header := range map[string]string{
		"unknown extension":  `{"alg":"HS256","typ":"JWT","crit":["exp-policy"],"exp-policy":"strict"}`,
		"b64 (RFC 7797)":     `{"alg":"HS256","crit":["b64"],"b64":true}`,
		"empty list":         `{"alg":"HS256","crit":[]}`,
		"not a list":         `{"alg":"HS256","crit":"exp-policy"}`,
		"names a registered": `{"alg":"HS256","crit":["alg"]}`,
	} {
		p, err := v.principal(bearer(signRaw(t, k.hmac, header, body)))
		if !errors.Is(err, idemhttp.ErrNoPrincipal) || !strings.Contains(err.Error(), "crit") {
			t.Errorf("%s: principal %q, err %v; want ErrNoPrincipal naming crit", name, p, err)
		}
	}
}

// TestJWTDuplicateMembers: a member named twice in the header or the
// claims is refused, not read as its last occurrence (which could name a
// different subject than another reader of the same token sees).
func TestJWTDuplicateMembers(t *testing.T) {
	k := newJWTKeys(t)
	v := hsVerifier(t, k, "https://issuer.test")
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	hdr := `{"alg":"HS256","typ":"JWT"}`
	for name, tc := range map[string]struct{ header, claims string }{
		"two sub":           {hdr, `{"sub":"alice","sub":"mallory","iss":"https://issuer.test","exp":` + exp + `}`},
		"two iss":           {hdr, `{"sub":"alice","iss":"https://evil.test","iss":"https://issuer.test","exp":` + exp + `}`},
		"two exp":           {hdr, `{"sub":"alice","iss":"https://issuer.test","exp":1,"exp":` + exp + `}`},
		"escaped duplicate": {hdr, `{"sub":"alice","s\u0075b":"mallory","iss":"https://issuer.test","exp":` + exp + `}`},
		"nested duplicate":  {hdr, `{"sub":"alice","iss":"https://issuer.test","exp":` + exp + `,"ctx":{"a":1,"a":2}}`},
		"two alg":           {`{"alg":"none","alg":"HS256","typ":"JWT"}`, `{"sub":"alice","iss":"https://issuer.test","exp":` + exp + `}`},
		"two kid":           {`{"alg":"HS256","kid":"a","kid":"b"}`, `{"sub":"alice","iss":"https://issuer.test","exp":` + exp + `}`},
	} {
		p, err := v.principal(bearer(signRaw(t, k.hmac, tc.header, tc.claims)))
		if !errors.Is(err, idemhttp.ErrNoPrincipal) || !strings.Contains(err.Error(), "duplicate") {
			t.Errorf("%s: principal %q, err %v; want ErrNoPrincipal naming the duplicate", name, p, err)
		}
	}
	ok := signRaw(t, k.hmac, hdr, `{"sub":"alice","iss":"https://issuer.test","exp":`+exp+`,"ctx":{"a":1},"aud":["x","x"]}`)
	if p, err := v.principal(bearer(ok)); err != nil || p != "alice" {
		t.Errorf("distinct members (a repeated array value is no duplicate member): principal %q, %v", p, err)
	}
}

// TestJWTPrincipalScopedByIssuer: with no issuer pinned, any issuer whose
// key the proxy holds is accepted, so the same sub from two issuers names
// two callers; the principal is the issuer and the claim together. With
// the issuer pinned it is the claim alone.
func TestJWTPrincipalScopedByIssuer(t *testing.T) {
	k := newJWTKeys(t)
	tok := func(iss any, sub string) string {
		c := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
		if iss != nil {
			c["iss"] = iss
		}
		return sign(t, jwt.SigningMethodHS256, k.hmac, c, "")
	}
	open := hsVerifier(t, k, "")
	principal := func(tok string) string {
		t.Helper()
		p, err := open.principal(bearer(tok))
		if err != nil {
			t.Fatalf("principal: %v", err)
		}
		return p
	}
	a, b := principal(tok("https://a.test", "alice")), principal(tok("https://b.test", "alice"))
	if a == b {
		t.Errorf("sub alice of two issuers is one principal %q", a)
	}
	if a != principal(tok("https://a.test", "alice")) {
		t.Errorf("one issuer's alice is not stable")
	}
	if want := issuerPrincipal("https://a.test", "alice"); a != want {
		t.Errorf("principal %q, want %q", a, want)
	}
	// No separator makes two pairs one string.
	pairs := [][2]string{
		{"https://a.test", "alice"}, {"https://a.test/", "/alice"}, {"https://a.test/alice", ""},
		{`x","y`, "z"}, {"x", `y","z`}, {"", "https://a.test alice"}, {"a\x00b", "c"}, {"a", "\x00bc"},
	}
	seen := map[string][2]string{}
	for _, pr := range pairs {
		var p string
		if pr[1] == "" {
			continue // an empty claim is refused before it is scoped
		}
		p = principal(tok(pr[0], pr[1]))
		if prev, dup := seen[p]; dup {
			t.Errorf("issuer/claim pairs %q and %q are one principal %q", prev, pr, p)
		}
		seen[p] = pr
	}
	noIss := principal(tok(nil, "alice"))
	if noIss == a || noIss == "alice" {
		t.Errorf("a token without iss gets principal %q, the same as one with an issuer or the bare sub", noIss)
	}
	if p, err := open.principal(bearer(tok(42, "alice"))); !errors.Is(err, idemhttp.ErrNoPrincipal) {
		t.Errorf("numeric iss: principal %q, err %v; want ErrNoPrincipal", p, err)
	}
	pinned := hsVerifier(t, k, "https://a.test")
	if p, err := pinned.principal(bearer(tok("https://a.test", "alice"))); err != nil || p != "alice" {
		t.Errorf("pinned issuer: principal %q, %v; want the bare sub", p, err)
	}
}
