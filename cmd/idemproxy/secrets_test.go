package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/redistest"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsAndErrorsHoldNoSecrets drives the error paths (upstream down,
// store down, bad and reused tokens, bad JWTs) and looks for the raw
// bearer token, principal, idempotency key and one-time token in every log
// line and every answer.
func TestLogsAndErrorsHoldNoSecrets(t *testing.T) {
	k := newJWTKeys(t)
	redis := redistest.Start(t)
	const principal, key = "alice-principal-7f3a", "order-key-9c1d"
	cfg := parseConfig(t, `
store_budget = "300ms"
[principal]
source = "jwt"
[principal.jwt]
algorithms = ["HS256"]
hmac_key_file = "`+k.hmacFile+`"
[[route]]
match = "POST /orders"
mode = "key"
[[route]]
match = "POST /tokens"
mode = "issue-token"
[[route]]
match = "POST /form"
mode = "token"
`, "http://127.0.0.1:1", "redis://"+redis.Addr()+"/0")
	var logs syncBuffer
	srv, _ := startProxyLog(t, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	bearerTok := sign(t, jwt.SigningMethodHS256, k.hmac, claims(principal), "")
	var answers strings.Builder
	do := func(path, h, v string) (*http.Response, []byte) {
		res, body := send(t, srv.URL+path, "POST", "", "", `{}`, "Authorization", "Bearer "+bearerTok, h, v)
		answers.Write(body)
		for name, vs := range res.Header {
			answers.WriteString(name + ": " + strings.Join(vs, ",") + "\n")
		}
		return res, body
	}
	do("/orders", "Idempotency-Key", key) // upstream down: 502
	res, body := do("/tokens", "", "")
	var tok idemhttp.IssuedToken
	if err := json.Unmarshal(body, &tok); err != nil || res.StatusCode != http.StatusCreated || tok.Token == "" {
		t.Fatalf("token issue: %d %s", res.StatusCode, body)
	}
	answers.Reset() // the issuing answer holds the token by design
	do("/form", "Idempotency-Token", tok.Token)
	do("/form", "Idempotency-Token", tok.Token)
	do("/form", "Idempotency-Token", tok.Token+"x")
	send(t, srv.URL+"/orders", "POST", "", key, `{}`, "Authorization", "Bearer "+bearerTok+"x")
	redis.Stop()
	do("/orders", "Idempotency-Key", key)
	do("/form", "Idempotency-Token", tok.Token)
	all := logs.String() + answers.String()
	for name, secret := range map[string]string{"bearer token": bearerTok, "principal": principal, "token": tok.Token} {
		if strings.Contains(all, secret) {
			t.Errorf("the %s appears in logs or answers", name)
		}
	}
	// The key may be echoed to the client that sent it (the problem
	// member idempotency_key), never logged.
	if strings.Contains(logs.String(), key) {
		t.Error("the idempotency key appears in the logs")
	}
	if !strings.Contains(logs.String(), "store_error") || !strings.Contains(logs.String(), "upstream error") {
		t.Fatalf("the error paths did not run; logs:\n%s", logs.String())
	}
}
