package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

const callbackSecret = "whsec_proxy-callback-secret-0123456789"

// callbackConfig is a callback route keyed by the body member
// out_trade_no, signed by the provider; secretFile holds the secret.
func callbackConfig(secretFile string) string {
	return fmt.Sprintf(`
[[route]]
match = "POST /pay/notify"
mode = "key"
key_from = "json:out_trade_no"
include = ["amount"]
callback = true
retention = "720h"

[route.signature]
sender = "payments"
secret_file = %q
`, secretFile)
}

func writeSecret(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(path, []byte(callbackSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// paidUpstream counts the notifications that reach it.
func paidUpstream(t *testing.T) (string, *atomic.Int64) {
	var hits atomic.Int64
	url := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n := hits.Add(1)
		fmt.Fprintf(w, "paid %d: %s", n, b)
	}))
	return url, &hits
}

func TestProxyCallbackRoute(t *testing.T) {
	upstream, hits := paidUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, callbackConfig(writeSecret(t)), upstream, "mem://"))
	url := srv.URL + "/pay/notify"
	genuine := `{"out_trade_no":"T-77","amount":100,"sent_at":1}`

	// Forged first: unsigned, wrongly signed, and the genuine signature
	// over another body.
	forged := `{"out_trade_no":"T-77","amount":1}`
	for _, sig := range []string{"", "sha256=" + strings.Repeat("ab", 32), hmacHex("attacker-secret-0123456789abcd", forged), hmacHex(callbackSecret, genuine)} {
		res, body := send(t, url, http.MethodPost, "", "", forged, "X-Signature", sig)
		wantStatus(t, res, body, http.StatusUnauthorized)
		if strings.Contains(string(body), callbackSecret) {
			t.Fatal("the answer holds the secret")
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d forged callbacks reached the upstream", n)
	}
	res, first := send(t, url, http.MethodPost, "", "", genuine, "X-Signature", hmacHex(callbackSecret, genuine))
	wantStatus(t, res, first, http.StatusOK)
	// The provider's retry changed sent_at, outside the include list.
	retry := `{"sent_at":2,"amount":100,"out_trade_no":"T-77"}`
	res, again := send(t, url, http.MethodPost, "", "", retry, "X-Signature", hmacHex(callbackSecret, retry))
	wantStatus(t, res, again, http.StatusOK)
	if res.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first, again) {
		t.Fatalf("retry: replayed %q body %s, want the first answer %s", res.Header.Get("Idempotent-Replayed"), again, first)
	}
	// Forged after genuine: no replay of the genuine answer.
	res, body := send(t, url, http.MethodPost, "", "", genuine, "X-Signature", "sha256="+strings.Repeat("00", 32))
	wantStatus(t, res, body, http.StatusUnauthorized)
	if bytes.Contains(body, []byte("paid")) {
		t.Fatalf("a forgery read the genuine answer: %s", body)
	}
	// A signed callback without its key, and one naming another amount.
	nokey := `{"amount":100}`
	res, body = send(t, url, http.MethodPost, "", "", nokey, "X-Signature", hmacHex(callbackSecret, nokey))
	wantStatus(t, res, body, http.StatusBadRequest)
	other := `{"out_trade_no":"T-77","amount":5}`
	res, body = send(t, url, http.MethodPost, "", "", other, "X-Signature", hmacHex(callbackSecret, other))
	wantStatus(t, res, body, http.StatusUnprocessableEntity)
	if n := hits.Load(); n != 1 {
		t.Fatalf("the upstream saw %d notifications, want 1", n)
	}
}

// TestProxyCallbackRace sends one callback many times at once, with
// forgeries among them: the upstream sees it once, every genuine copy is
// answered 200 with the first answer, every forgery 401.
func TestProxyCallbackRace(t *testing.T) {
	upstream, hits := paidUpstream(t)
	srv, _ := startProxy(t, parseConfig(t, callbackConfig(writeSecret(t)), upstream, "mem://"))
	url := srv.URL + "/pay/notify"
	genuine := `{"out_trade_no":"T-88","amount":100}`
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	bodies := make(chan string, n)
	for i := range 2 * n {
		wg.Go(func() {
			sig, want := hmacHex(callbackSecret, genuine), http.StatusOK
			if i%2 == 1 {
				sig, want = "", http.StatusUnauthorized
			}
			res, body, err := trySend(url, http.MethodPost, "", "", genuine, "X-Signature", sig)
			switch {
			case err != nil:
				errs <- err
			case res.StatusCode != want:
				errs <- fmt.Errorf("status %d, want %d: %s", res.StatusCode, want, body)
			case want == http.StatusOK:
				bodies <- string(body)
			}
		})
	}
	wg.Wait()
	close(errs)
	close(bodies)
	for err := range errs {
		t.Error(err)
	}
	for b := range bodies {
		if b != "paid 1: "+genuine {
			t.Errorf("answer %q, want the first", b)
		}
	}
	if h := hits.Load(); h != 1 {
		t.Fatalf("the upstream saw %d notifications, want 1", h)
	}
}

func TestProxyCallbackConfigMistakes(t *testing.T) {
	secret := writeSecret(t)
	short := filepath.Join(t.TempDir(), "short.secret")
	if err := os.WriteFile(short, []byte("tiny-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ text, want string }{
		"key_from on window":  {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"window\"\nkey_from = \"json:id\"\n", "key_from applies to mode key only"},
		"bad key_from":        {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nkey_from = \"body:id\"\n", `key_from "body:id" is not`},
		"empty key_from":      {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nkey_from = \"json:\"\n", `key_from "json:" is not`},
		"callback on token":   {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"token\"\ncallback = true\n", "callback applies to mode key only"},
		"callback optional":   {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\ncallback = true\noptional_key = true\n", "callback and optional_key"},
		"include on token":    {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"token\"\ninclude = [\"a\"]\n", "include applies"},
		"no secret file":      {"[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\n[route.signature]\nsender = \"p\"\n", "signature.secret_file is required"},
		"missing secret":      {"[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\n[route.signature]\nsender = \"p\"\nsecret_file = \"/nonexistent/secret\"\n", "signature.secret_file"},
		"no sender":           {fmt.Sprintf("[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\n[route.signature]\nsecret_file = %q\n", secret), "signature.sender is required"},
		"path through arrays": {strings.Replace(callbackConfig(secret), "json:out_trade_no", "json:items[].id", 1), `"items[].id"`},
		"bad include":         {strings.Replace(callbackConfig(secret), `["amount"]`, `["a..b"]`, 1), `"a..b"`},
		"bad key header":      {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nkey_from = \"header:a b\"\n", `"a b" is not a header name`},
		"short secret":        {callbackConfig(short), "holds 11 bytes, at least 16"},
		"signature on pass":   {fmt.Sprintf("[[route]]\nmatch = \"POST /a\"\nmode = \"pass\"\n[route.signature]\nsender = \"p\"\nsecret_file = %q\n", secret), "signature applies to guarded routes only"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := loadConfig([]string{"-config", path, "-upstream", "http://127.0.0.1:9"}, noEnv, new(bytes.Buffer))
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "tiny-secret") {
				t.Fatalf("error %v, want errConfig containing %q and no secret", err, tc.want)
			}
		})
	}
}

// A callback route's 2xx too large to store (max_stored_response) is
// answered 2xx on every retry, without its body, and the upstream sees
// the callback once: the sidecar's callback routes run idemhttp's
// callback profile.
func TestProxyCallbackKeepsA2xxTooLargeToStore(t *testing.T) {
	upstream, hits := paidUpstream(t)
	cfg := strings.Replace(callbackConfig(writeSecret(t)), `retention = "720h"`, "retention = \"720h\"\nmax_stored_response = 16", 1)
	srv, _ := startProxy(t, parseConfig(t, cfg, upstream, "mem://"))
	url := srv.URL + "/pay/notify"
	genuine := `{"out_trade_no":"T-88","amount":100}`
	res, first := send(t, url, http.MethodPost, "", "", genuine, "X-Signature", hmacHex(callbackSecret, genuine))
	wantStatus(t, res, first, http.StatusOK)
	for range 2 {
		res, again := send(t, url, http.MethodPost, "", "", genuine, "X-Signature", hmacHex(callbackSecret, genuine))
		wantStatus(t, res, again, http.StatusOK)
		if res.Header.Get("Idempotent-Replayed") != "true" || len(again) != 0 {
			t.Fatalf("retry: replayed %q, body %q; want 200 replayed without the body", res.Header.Get("Idempotent-Replayed"), again)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the upstream saw %d notifications, want 1", n)
	}
}
