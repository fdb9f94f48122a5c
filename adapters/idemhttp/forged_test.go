package idemhttp_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// forgedRoute is a callback route keyed by the body member "txn", whose
// principal is the sender whose signature matches: the provider, or a
// second provider with its own secret. Its handler counts runs per
// principal-and-transaction and answers with them.
type forgedRoute struct {
	srv  *httptest.Server
	logs *syncBuffer
	mu   sync.Mutex
	runs map[string]int
}

var otherSecret = []byte("whsec_other-provider-secret-abcdef")

func newForgedRoute(t *testing.T) *forgedRoute {
	t.Helper()
	var fns []func(*http.Request) (string, error)
	for _, s := range []idemhttp.Signature{
		{Sender: "provider", Secret: providerSecret},
		{Sender: "other", Secret: otherSecret},
	} {
		fn, err := idemhttp.SignedPrincipal(s)
		require.NoError(t, err)
		fns = append(fns, fn)
	}
	anyOf := func(r *http.Request) (string, error) {
		var errs []error
		for _, fn := range fns {
			p, err := fn(r)
			if err == nil {
				return p, nil
			}
			errs = append(errs, err)
		}
		return "", errors.Join(errs...)
	}
	fr := &forgedRoute{logs: &syncBuffer{}, runs: map[string]int{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sender := r.Header.Get("X-Test-Sender")
		fr.mu.Lock()
		fr.runs[sender]++
		n := fr.runs[sender]
		fr.mu.Unlock()
		fmt.Fprintf(w, "handled by %s run %d: %s", sender, n, body)
	})
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), idemhttp.WithPrincipal(anyOf), idemhttp.Callback(0),
		idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("txn")), idemhttp.WithLogger(slog.New(slog.NewTextHandler(fr.logs, nil)))))
	fr.srv = httptest.NewServer(mw(h))
	t.Cleanup(fr.srv.Close)
	return fr
}

func (fr *forgedRoute) count(sender string) int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.runs[sender]
}

// send posts body with the signature header sig ("" for none); sender
// labels the request for the handler's count.
func (fr *forgedRoute) send(body, sig, sender string) (int, bool, string, error) {
	r, err := http.NewRequest(http.MethodPost, fr.srv.URL, strings.NewReader(body))
	if err != nil {
		return 0, false, "", err
	}
	if sig != "" {
		r.Header.Set("X-Signature", sig)
	}
	r.Header.Set("X-Test-Sender", sender)
	resp, err := fr.srv.Client().Do(r)
	if err != nil {
		return 0, false, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(idemhttp.ReplayedHeader) == "true", string(b), err
}

const genuineBody = `{"txn":"4200001234","amount":100,"status":"SUCCESS"}`

func genuineSig() string { return "sha256=" + sign(providerSecret, genuineBody) }

// forgeries are callbacks an attacker who knows the transaction number
// can send: unsigned, badly signed, signed with a key of its own, and the
// genuine signature over another body.
func forgeries() []struct{ name, body, sig string } {
	forged := `{"txn":"4200001234","amount":1,"status":"SUCCESS"}`
	return []struct{ name, body, sig string }{
		{"unsigned", forged, ""},
		{"garbage signature", forged, "sha256=" + strings.Repeat("0", 64)},
		{"attacker's key", forged, "sha256=" + sign([]byte("attacker-own-secret-0123456789ab"), forged)},
		{"genuine signature, altered body", forged, genuineSig()},
	}
}

func TestForgedCallbackFirstThenGenuine(t *testing.T) {
	fr := newForgedRoute(t)
	for _, f := range forgeries() {
		code, replayed, body, err := fr.send(f.body, f.sig, "forger")
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, code, f.name)
		assert.False(t, replayed, f.name)
		assert.Contains(t, body, idemhttp.ProblemUnauthenticated, f.name)
	}
	assert.Zero(t, fr.count("forger"), "no forged callback ran")
	code, replayed, first, err := fr.send(genuineBody, genuineSig(), "provider")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "the genuine callback is answered, not blocked")
	assert.False(t, replayed, "the genuine callback runs: nothing was stored for it by a forgery")
	assert.Equal(t, "handled by provider run 1: "+genuineBody, first)
	code, replayed, again, err := fr.send(genuineBody, genuineSig(), "provider")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, replayed)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, fr.count("provider"), "the genuine callback ran once")
	fr.requireCleanLogs(t)
}

func TestForgedCallbackAfterGenuineGetsNoReplay(t *testing.T) {
	fr := newForgedRoute(t)
	code, _, first, err := fr.send(genuineBody, genuineSig(), "provider")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	for _, f := range forgeries() {
		code, replayed, body, err := fr.send(f.body, f.sig, "forger")
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, code, f.name)
		assert.False(t, replayed, f.name)
		assert.NotContains(t, body, "handled", "%s: a forgery must not read the genuine answer", f.name)
	}
	// The genuine answer is still there for the provider's retry.
	code, replayed, again, err := fr.send(genuineBody, genuineSig(), "provider")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, replayed)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, fr.count("provider"))
	assert.Zero(t, fr.count("forger"))
	fr.requireCleanLogs(t)
}

// TestSameTransactionFromAnotherSenderIsItsOwnRecord: a second
// authenticated sender that reuses the provider's transaction number gets
// a record of its own; it neither replays nor blocks the provider's.
func TestSameTransactionFromAnotherSenderIsItsOwnRecord(t *testing.T) {
	fr := newForgedRoute(t)
	_, _, first, err := fr.send(genuineBody, genuineSig(), "provider")
	require.NoError(t, err)
	code, replayed, other, err := fr.send(genuineBody, "sha256="+sign(otherSecret, genuineBody), "other")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.False(t, replayed, "another sender never gets the provider's stored answer")
	assert.NotEqual(t, first, other)
	assert.Equal(t, 1, fr.count("provider"))
	assert.Equal(t, 1, fr.count("other"))
}

// TestForgedCallbacksConcurrentWithGenuine races forgeries of every kind
// against the provider's retries of one callback: the genuine callback
// runs once and every genuine request gets its 2xx answer; every forgery
// gets 401.
func TestForgedCallbacksConcurrentWithGenuine(t *testing.T) {
	fr := newForgedRoute(t)
	const rounds = 12
	fs := forgeries()
	type result struct {
		forged bool
		code   int
		body   string
		err    error
	}
	results := make(chan result, rounds*(len(fs)+2))
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	for range rounds {
		for _, f := range fs {
			wg.Go(func() {
				start.Wait()
				code, _, body, err := fr.send(f.body, f.sig, "forger")
				results <- result{true, code, body, err}
			})
		}
		for range 2 {
			wg.Go(func() {
				start.Wait()
				code, _, body, err := fr.send(genuineBody, genuineSig(), "provider")
				results <- result{false, code, body, err}
			})
		}
	}
	start.Done()
	wg.Wait()
	close(results)
	var genuine atomic.Int64
	for r := range results {
		require.NoError(t, r.err)
		if r.forged {
			assert.Equal(t, http.StatusUnauthorized, r.code, r.body)
			continue
		}
		genuine.Add(1)
		assert.Equal(t, http.StatusOK, r.code, r.body)
		assert.Equal(t, "handled by provider run 1: "+genuineBody, r.body)
	}
	assert.EqualValues(t, rounds*2, genuine.Load())
	assert.Equal(t, 1, fr.count("provider"))
	assert.Zero(t, fr.count("forger"))
	fr.requireCleanLogs(t)
}

// requireCleanLogs checks that no log line holds a secret, a signature
// or the transaction number.
func (fr *forgedRoute) requireCleanLogs(t *testing.T) {
	t.Helper()
	logs := fr.logs.String()
	for _, secret := range []string{string(providerSecret), string(otherSecret), genuineSig()[len("sha256="):], "4200001234"} {
		assert.NotContains(t, logs, secret)
	}
}

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
