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
	if p, err := v.principal(bearer(sign(t, jwt.SigningMethodRS256, k.rsa, claims("alice"), ""))); err != nil || p != "t-alice" {
		t.Fatalf("principal %q, %v", p, err)
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
