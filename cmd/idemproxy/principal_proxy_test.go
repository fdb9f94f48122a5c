package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// TestMTLSPrincipalThroughTheProxy runs the program (run) with a TLS
// listener and principal source mtls: a guarded route answers 401 without
// a client certificate, and keys belong to the certificate's subject.
func TestMTLSPrincipalThroughTheProxy(t *testing.T) {
	up, us := newGoUpstream(t)
	ca, caKey := newCert(t, "test CA", nil, nil)
	server, serverKey := newCert(t, "127.0.0.1", ca, caKey)
	alice, aliceKey := newCert(t, "alice", ca, caKey)
	bob, bobKey := newCert(t, "bob", ca, caKey)
	rogueCA, rogueKey := newCert(t, "rogue CA", nil, nil)
	rogue, rogueLeafKey := newCert(t, "alice", rogueCA, rogueKey)
	dir := t.TempDir()
	pemOf := func(c *x509.Certificate) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	keyOf := func(k *ecdsa.PrivateKey) []byte {
		der, _ := x509.MarshalPKCS8PrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	conf := writeFile(t, dir, "idemproxy.toml", []byte(`
listen = "127.0.0.1:0"
upstream = "`+us.URL+`"
store = "mem://"
[principal]
source = "mtls"
[tls]
cert_file = "`+writeFile(t, dir, "server.pem", pemOf(server))+`"
key_file = "`+writeFile(t, dir, "server.key", keyOf(serverKey))+`"
client_ca_file = "`+writeFile(t, dir, "ca.pem", pemOf(ca))+`"
[[route]]
match = "POST /orders"
mode = "key"
`))
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", conf}, noEnv, io.Discard, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	post := func(cert *x509.Certificate, key *ecdsa.PrivateKey, idemKey string) (*http.Response, []byte) {
		t.Helper()
		tc := &tls.Config{RootCAs: roots}
		if cert != nil {
			tc.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("POST", "https://"+addr+"/orders", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", idemKey)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	res, body := post(nil, nil, "k")
	wantStatus(t, res, body, http.StatusUnauthorized)
	res, first := post(alice, aliceKey, "k")
	wantStatus(t, res, first, http.StatusCreated)
	res, body = post(alice, aliceKey, "k")
	wantStatus(t, res, body, http.StatusCreated)
	if !bytes.Equal(body, first) || res.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("alice's retry: %s replayed %q, want %s replayed", body, res.Header.Get(idemhttp.ReplayedHeader), first)
	}
	res, body = post(bob, bobKey, "k")
	wantStatus(t, res, body, http.StatusCreated)
	if res.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatal("bob got alice's stored response")
	}
	// A certificate from another CA, with alice's subject, is refused in
	// the handshake. (GetClientCertificate sends it although the server
	// names other acceptable CAs; with Certificates the client would send
	// none and get 401.)
	rogueCert := &tls.Certificate{Certificate: [][]byte{rogue.Raw}, PrivateKey: rogueLeafKey}
	tc := &tls.Config{RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return rogueCert, nil
	}}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
	if res, err := c.Post("https://"+addr+"/orders", "application/json", strings.NewReader(`{}`)); err == nil {
		res.Body.Close()
		t.Fatalf("a certificate from another CA got %d", res.StatusCode)
	}
	if up.count("/orders") != 2 {
		t.Fatalf("upstream runs %d, want 2 (alice once, bob once)", up.count("/orders"))
	}
}

// TestJWTPrincipalThroughTheProxy: a guarded route behind JWT (RS256 from
// a JWKS file) answers 401 to a missing, expired or forged token, and keys
// belong to the token's subject.
func TestJWTPrincipalThroughTheProxy(t *testing.T) {
	k := newJWTKeys(t)
	up, us := newGoUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, `
[principal]
source = "jwt"
[principal.jwt]
algorithms = ["RS256", "ES256"]
jwks_file = "`+k.jwks+`"
[[route]]
match = "POST /orders"
mode = "key"
`, us.URL, "mem://"))
	post := func(tok, key string) (*http.Response, []byte) {
		t.Helper()
		var hdr []string
		if tok != "" {
			hdr = []string{"Authorization", "Bearer " + tok}
		}
		return send(t, srv.URL+"/orders", "POST", "", key, `{}`, hdr...)
	}
	expired := claims("alice")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	other := newJWTKeys(t)
	for name, tok := range map[string]string{
		"no token": "",
		"expired":  sign(t, jwt.SigningMethodRS256, k.rsa, expired, "rsa1"),
		"forged":   sign(t, jwt.SigningMethodRS256, other.rsa, claims("alice"), "rsa1"),
	} {
		res, body := post(tok, "k")
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, res.StatusCode, body)
		}
	}
	res, first := post(sign(t, jwt.SigningMethodRS256, k.rsa, claims("alice"), "rsa1"), "k")
	wantStatus(t, res, first, http.StatusCreated)
	res, body := post(sign(t, jwt.SigningMethodES256, k.ec, claims("alice"), "ec1"), "k")
	wantStatus(t, res, body, http.StatusCreated)
	if !bytes.Equal(body, first) || res.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("alice's retry: %s replayed %q", body, res.Header.Get(idemhttp.ReplayedHeader))
	}
	res, body = post(sign(t, jwt.SigningMethodRS256, k.rsa, claims("bob"), "rsa1"), "k")
	wantStatus(t, res, body, http.StatusCreated)
	if res.Header.Get(idemhttp.ReplayedHeader) != "" || up.count("/orders") != 2 {
		t.Fatalf("bob: replayed %q, upstream runs %d (want 2)", res.Header.Get(idemhttp.ReplayedHeader), up.count("/orders"))
	}
}
