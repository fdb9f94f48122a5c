package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// TestUpgradeHeadersDoNotSwitchTheGuardsOff: a POST with Connection:
// Upgrade and Upgrade: foo is an ordinary request to a guarded route. It
// needs its principal (header, JWT or mTLS) and its key, and a repeat is
// replayed (key) or refused (window), never run again.
func TestUpgradeHeadersDoNotSwitchTheGuardsOff(t *testing.T) {
	k := newJWTKeys(t)
	ca, _ := newCert(t, "test CA", nil, nil)
	caFile := writeFile(t, t.TempDir(), "ca.pem", certPEM(ca))
	for _, tc := range []struct {
		name, principal string
	}{
		{"header", "[principal]\nsource = \"header\"\nheader = \"X-User\"\n"},
		{"jwt", "[principal]\nsource = \"jwt\"\n[principal.jwt]\nalgorithms = [\"RS256\"]\njwks_file = \"" + k.jwks + "\"\n"},
		// The test server is plain HTTP, so no request has a client
		// certificate; the listener's files are not loaded.
		{"mtls", "[tls]\ncert_file = \"unused.pem\"\nkey_file = \"unused.key\"\nclient_ca_file = \"" + caFile + "\"\n[principal]\nsource = \"mtls\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, us := newGoUpstream(t)
			cfg := parseConfig(t, tc.principal+`
[[route]]
match = "POST /orders"
mode = "key"
[[route]]
match = "POST /quick"
mode = "window"
window = "1m"
`, us.URL, "mem://")
			srv, p := startProxy(t, cfg)
			for i := range 3 {
				for _, path := range []string{"/orders", "/quick"} {
					res, b := postUpgrade(t, srv.URL+path, "", "", `{"a":1}`)
					wantStatus(t, res, b, http.StatusUnauthorized)
					res, b = postUpgrade(t, srv.URL+path, "", fmt.Sprint("k", i), `{"a":1}`)
					wantStatus(t, res, b, http.StatusUnauthorized)
				}
			}
			if n := up.runs.Load(); n != 0 || p.upgrades.Load() != 0 {
				t.Fatalf("without a principal: upstream runs %d, upgrades passed %d; want 0 and 0", n, p.upgrades.Load())
			}
			if tc.name != "header" {
				return
			}
			res, b := postUpgrade(t, srv.URL+"/orders", "alice", "", `{"a":1}`)
			wantStatus(t, res, b, http.StatusBadRequest) // the key is still required
			want := []int{http.StatusCreated, http.StatusCreated, http.StatusCreated}
			for i := range 3 {
				res, b := postUpgrade(t, srv.URL+"/orders", "alice", "k", `{"a":1}`)
				wantStatus(t, res, b, want[i])
				if replayed := res.Header.Get("Idempotent-Replayed") == "true"; replayed != (i > 0) {
					t.Fatalf("request %d: replayed %v", i, replayed)
				}
				res, b = postUpgrade(t, srv.URL+"/quick", "alice", "", `{"a":1}`)
				if i == 0 {
					wantStatus(t, res, b, http.StatusCreated)
				} else {
					wantStatus(t, res, b, http.StatusConflict)
				}
			}
			if up.count("/orders") != 1 || up.count("/quick") != 1 {
				t.Fatalf("upstream ran /orders %d and /quick %d times, want 1 and 1", up.count("/orders"), up.count("/quick"))
			}
		})
	}
	t.Run("jwt token", func(t *testing.T) {
		// With a valid token the request is guarded like any other.
		up, us := newGoUpstream(t)
		srv, _ := startProxy(t, parseConfig(t, "[principal]\nsource = \"jwt\"\n[principal.jwt]\nalgorithms = [\"RS256\"]\njwks_file = \""+
			k.jwks+"\"\n[[route]]\nmatch = \"POST /orders\"\nmode = \"key\"\n", us.URL, "mem://"))
		tok := sign(t, jwt.SigningMethodRS256, k.rsa, claims("alice"), "rsa1")
		for range 3 {
			res, b := postUpgrade(t, srv.URL+"/orders", "", "k", `{"a":1}`, "Authorization", "Bearer "+tok)
			wantStatus(t, res, b, http.StatusCreated)
		}
		if up.runs.Load() != 1 {
			t.Fatalf("upstream runs %d, want 1", up.runs.Load())
		}
	})
}

// postUpgrade posts body with Connection: Upgrade and Upgrade: foo, and
// the other headers given. An upstream that switches protocols (101)
// fails the test: the request went through unguarded.
func postUpgrade(t *testing.T, url, user, key, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	hdr = append(hdr, "X-User", user, "Idempotency-Key", key, "Connection", "Upgrade", "Upgrade", "foo")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusSwitchingProtocols {
		t.Fatalf("%s: 101 Switching Protocols: the request passed unguarded", url)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// wsHandshake is a WebSocket opening handshake (RFC 6455 4.1) for path.
func wsHandshake(method, path, user string) string {
	s := method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	if user != "" {
		s += "X-User: " + user + "\r\n"
	}
	return s + "\r\n"
}

// dialProxy sends raw to the proxy and reads the response head.
func dialProxy(t *testing.T, url, raw string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprint(conn, raw)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, res
}

// TestWebSocketHandshakePassesThroughAuthenticated: a real WebSocket
// handshake (GET, Sec-WebSocket-Key and -Version) on a guarded route is
// passed to the upstream, which switches protocols, once its caller is
// identified; without a principal it gets 401. Anything short of a real
// handshake is guarded.
func TestWebSocketHandshakePassesThroughAuthenticated(t *testing.T) {
	up, us := newGoUpstream(t)
	srv, p := startProxy(t, parseConfig(t, baseConfig+`
[[route]]
match = "GET /ws"
mode = "key"
`, us.URL, "mem://"))
	conn, br, res := dialProxy(t, srv.URL, wsHandshake("GET", "/ws", "alice"))
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %d, want 101", res.StatusCode)
	}
	fmt.Fprint(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo ping\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
	if p.upgrades.Load() != 1 {
		t.Fatalf("upgrades counted %d, want 1", p.upgrades.Load())
	}

	_, _, res = dialProxy(t, srv.URL, wsHandshake("GET", "/ws", ""))
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("handshake without a principal: %d, want 401", res.StatusCode)
	}
	// No Sec-WebSocket-Key: not a handshake, so the route's key is required.
	_, _, res = dialProxy(t, srv.URL, strings.Replace(wsHandshake("GET", "/ws", "alice"), "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "", 1))
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("handshake without Sec-WebSocket-Key: %d, want 400 (key missing)", res.StatusCode)
	}
	if up.count("/ws") != 1 || p.upgrades.Load() != 1 {
		t.Fatalf("upstream ran /ws %d times, upgrades %d; want 1 and 1", up.count("/ws"), p.upgrades.Load())
	}
}
