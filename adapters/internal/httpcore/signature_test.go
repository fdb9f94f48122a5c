package httpcore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignatureVerify(t *testing.T) {
	secret := []byte("0123456789abcdef-shared")
	v, err := SignatureScheme{Sender: "p", Secret: secret, TimestampHeader: "X-Ts", Tolerance: time.Minute}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"id":1}`)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "." + string(body)))
	good := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if got := v.sig.Sign(ts, body); got != good {
		t.Fatalf("Sign = %s, want %s", got, good)
	}
	if p, err := v.Verify([]string{good}, []string{ts}, body, now); err != nil || p != "p" {
		t.Fatalf("Verify = %q, %v", p, err)
	}
	for name, c := range map[string]struct {
		sig, ts []string
		body    string
		now     time.Time
	}{
		"no signature":     {nil, []string{ts}, string(body), now},
		"two signatures":   {[]string{good, good}, []string{ts}, string(body), now},
		"no timestamp":     {[]string{good}, nil, string(body), now},
		"bad timestamp":    {[]string{good}, []string{"soon"}, string(body), now},
		"late":             {[]string{good}, []string{ts}, string(body), now.Add(time.Minute + time.Second)},
		"early":            {[]string{good}, []string{ts}, string(body), now.Add(-time.Minute - time.Second)},
		"other body":       {[]string{good}, []string{ts}, `{"id":2}`, now},
		"odd hex":          {[]string{"sha256=" + strings.Repeat("g", 64)}, []string{ts}, string(body), now},
		"no prefix":        {[]string{good[len("sha256="):]}, []string{ts}, string(body), now},
		"huge timestamp":   {[]string{good}, []string{"99999999999999999999"}, string(body), now},
		"negative ts":      {[]string{good}, []string{"-1"}, string(body), now},
		"trailing garbage": {[]string{good + "00"}, []string{ts}, string(body), now},
	} {
		_, err := v.Verify(c.sig, c.ts, []byte(c.body), c.now)
		if !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
			continue
		}
		if strings.Contains(err.Error(), good[len("sha256="):]) || strings.Contains(err.Error(), string(secret)) {
			t.Errorf("%s: the error holds a secret value: %v", name, err)
		}
	}
}
