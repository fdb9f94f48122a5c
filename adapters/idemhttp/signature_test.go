package idemhttp_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
)

var providerSecret = []byte("whsec_provider-shared-secret-0123456789")

// sign returns the hex HMAC-SHA256 of the parts under secret, computed
// here without the package's code.
func sign(secret []byte, parts ...string) string {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

func signedRequest(body string, header http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/notify", strings.NewReader(body))
	for k, vs := range header {
		r.Header[k] = vs
	}
	return r
}

func TestSignedPrincipalAcceptsTheSendersSignature(t *testing.T) {
	principal, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: "provider", Secret: providerSecret})
	require.NoError(t, err)
	body := `{"txn":"T1","amount":5}`
	for _, sig := range []string{"sha256=" + sign(providerSecret, body), "sha256=" + strings.ToUpper(sign(providerSecret, body))} {
		r := signedRequest(body, http.Header{"X-Signature": {sig}})
		p, err := principal(r)
		require.NoError(t, err)
		assert.Equal(t, "provider", p)
		rest, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(rest), "the body is given back")
	}
}

func TestSignedPrincipalWithTimestamp(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	principal, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: "provider", Secret: providerSecret,
		Header: "Webhook-Signature", Prefix: "-", TimestampHeader: "Webhook-Timestamp", Tolerance: 5 * time.Minute,
		Now: func() time.Time { return now }})
	require.NoError(t, err)
	body := `{"txn":"T1"}`
	at := func(d time.Duration) http.Header {
		ts := strconv.FormatInt(now.Add(d).Unix(), 10)
		return http.Header{"Webhook-Signature": {sign(providerSecret, ts, ".", body)}, "Webhook-Timestamp": {ts}}
	}
	for _, d := range []time.Duration{0, -5 * time.Minute, 5 * time.Minute} {
		p, err := principal(signedRequest(body, at(d)))
		assert.NoError(t, err, "sent %v from now", d)
		assert.Equal(t, "provider", p)
	}
	for _, d := range []time.Duration{-5*time.Minute - time.Second, 5*time.Minute + time.Second} {
		_, err := principal(signedRequest(body, at(d)))
		assert.ErrorIs(t, err, idemhttp.ErrBadSignature, "sent %v from now", d)
	}
	h := at(0)
	h["Webhook-Timestamp"] = []string{strconv.FormatInt(now.Unix()+1, 10)} // not the signed one
	_, err = principal(signedRequest(body, h))
	assert.ErrorIs(t, err, idemhttp.ErrBadSignature, "a timestamp that was not signed")
	delete(h, "Webhook-Timestamp")
	_, err = principal(signedRequest(body, h))
	assert.ErrorIs(t, err, idemhttp.ErrBadSignature, "no timestamp")
}

func TestSignedPrincipalRefusesBadSignatures(t *testing.T) {
	principal, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: "provider", Secret: providerSecret, MaxBody: 64})
	require.NoError(t, err)
	body := `{"txn":"T1","amount":5}`
	good := sign(providerSecret, body)
	cases := []struct {
		name   string
		body   string
		header http.Header
	}{
		{"unsigned", body, nil},
		{"empty", body, http.Header{"X-Signature": {""}}},
		{"no prefix", body, http.Header{"X-Signature": {good}}},
		{"other prefix", body, http.Header{"X-Signature": {"sha1=" + good}}},
		{"not hex", body, http.Header{"X-Signature": {"sha256=" + strings.Repeat("zz", 32)}}},
		{"short", body, http.Header{"X-Signature": {"sha256=" + good[:62]}}},
		{"wrong secret", body, http.Header{"X-Signature": {"sha256=" + sign([]byte("attacker-secret-0123456789abcdef"), body)}}},
		{"altered body", `{"txn":"T1","amount":6}`, http.Header{"X-Signature": {"sha256=" + good}}},
		{"repeated", body, http.Header{"X-Signature": {"sha256=" + good, "sha256=" + good}}},
		{"body over the cap", body + strings.Repeat(" ", 64), http.Header{"X-Signature": {"sha256=" + sign(providerSecret, body+strings.Repeat(" ", 64))}}},
	}
	for _, c := range cases {
		p, err := principal(signedRequest(c.body, c.header))
		assert.Empty(t, p, c.name)
		assert.ErrorIs(t, err, idemhttp.ErrNoPrincipal, c.name)
		assert.ErrorIs(t, err, idemhttp.ErrBadSignature, c.name)
		if err != nil {
			assert.NotContains(t, err.Error(), good, "%s: the error holds the signature", c.name)
			assert.NotContains(t, err.Error(), string(providerSecret), "%s: the error holds the secret", c.name)
		}
	}
}

func TestSignedPrincipalRefusesBadSchemes(t *testing.T) {
	cases := []struct {
		name string
		s    idemhttp.Signature
		want string
	}{
		{"no sender", idemhttp.Signature{Secret: providerSecret}, "empty Sender"},
		{"short secret", idemhttp.Signature{Sender: "p", Secret: []byte("short")}, "the secret is 5 bytes"},
		{"bad header", idemhttp.Signature{Sender: "p", Secret: providerSecret, Header: "a b"}, `invalid Header "a b"`},
		{"bad timestamp header", idemhttp.Signature{Sender: "p", Secret: providerSecret, TimestampHeader: "a:b", Tolerance: time.Minute}, `invalid TimestampHeader "a:b"`},
		{"tolerance alone", idemhttp.Signature{Sender: "p", Secret: providerSecret, Tolerance: time.Minute}, "TimestampHeader and Tolerance go together"},
		{"timestamp alone", idemhttp.Signature{Sender: "p", Secret: providerSecret, TimestampHeader: "X-Ts"}, "TimestampHeader and Tolerance go together"},
		{"negative tolerance", idemhttp.Signature{Sender: "p", Secret: providerSecret, TimestampHeader: "X-Ts", Tolerance: -time.Minute}, "negative timestamp tolerance"},
		{"negative max body", idemhttp.Signature{Sender: "p", Secret: providerSecret, MaxBody: -1}, "negative MaxBody"},
	}
	for _, c := range cases {
		fn, err := idemhttp.SignedPrincipal(c.s)
		assert.Nil(t, fn, c.name)
		if assert.ErrorIs(t, err, idemkit.ErrInvalid, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
			assert.NotContains(t, err.Error(), string(providerSecret), c.name)
		}
	}
}

func TestSignedPrincipalKeepsItsOwnSecret(t *testing.T) {
	secret := bytes.Clone(providerSecret)
	principal, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: "provider", Secret: secret})
	require.NoError(t, err)
	body := `{}`
	sig := "sha256=" + sign(providerSecret, body)
	secret[0] ^= 0xff // the caller's slice changes after the call
	_, err = principal(signedRequest(body, http.Header{"X-Signature": {sig}}))
	assert.NoError(t, err)
	assert.False(t, errors.Is(err, idemhttp.ErrBadSignature))
}
