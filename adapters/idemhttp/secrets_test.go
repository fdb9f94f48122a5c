package idemhttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// faultStore is a memstore whose operations can be made to fail the way
// real backends fail: with error texts that name the store key, as the
// store contract allows (ErrCorrupt errors must name it).
type faultStore struct {
	store.Store
	mu    sync.Mutex
	fault func(op, key string) (ok bool, err error) // nil: no fault
}

func (s *faultStore) inject(op, key string) (bool, error, bool) {
	s.mu.Lock()
	f := s.fault
	s.mu.Unlock()
	if f == nil {
		return false, nil, false
	}
	ok, err := f(op, key)
	return ok, err, ok || err != nil
}

func (s *faultStore) set(f func(op, key string) (bool, error)) {
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

func (s *faultStore) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, store.Entry, error) {
	if _, err, hit := s.inject("setnx", key); hit {
		return false, store.Entry{}, err
	}
	return s.Store.SetNX(ctx, key, v, ttl)
}

func (s *faultStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if _, err, hit := s.inject("get", key); hit {
		return store.Entry{}, err
	}
	return s.Store.Get(ctx, key)
}

func (s *faultStore) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if _, err, hit := s.inject("cas", key); hit {
		return false, err
	}
	return s.Store.CompareAndSwap(ctx, key, old, new, ttl)
}

// captured is a slog handler that keeps every formatted line.
type captured struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *captured) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (c *captured) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Secrets never reach a log line or a client: every error path of every
// mode runs with the logs captured, over a store whose errors name the
// store key, and neither the logs nor any response (headers and body) may
// hold the raw key, token or principal. The client's own key may come back
// to it only as the idempotency_key member. With the engine's default
// hashed keys the engine's own log lines are checked too; with readable
// keys (a debugging mode, where store errors spell out principal and key)
// the middleware's lines and the responses still hold none.
func TestSecretsNeverReachLogsOrClients(t *testing.T) {
	t.Run("hashed keys", func(t *testing.T) { testSecrets(t, false) })
	t.Run("readable keys", func(t *testing.T) { testSecrets(t, true) })
}

func testSecrets(t *testing.T, readable bool) {
	const principal, key = "principal-Zq9w", "client-key-Xk7p"
	var logs captured
	fs := &faultStore{Store: testkit.NewMem(t)}
	engineOpts := []idemkit.Option{idemkit.WithObserver(idemkit.SlogObserver(logs.logger())), idemkit.WithMaxResultSize(4096)}
	if readable {
		engineOpts = []idemkit.Option{idemkit.WithReadableKeys(), idemkit.WithMaxResultSize(4096)}
	}
	e := testkit.NewEngineOn(t, fs, engineOpts...)
	opts := []idemhttp.Option{byUser, idemhttp.WithLogger(logs.logger())}
	stored := append(slices.Clip(opts), idemhttp.WithMaxStoredResponse(2048)) // Idempotency and Token only
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusCreated
		if r.Header.Get("X-Fail") != "" {
			status = http.StatusInternalServerError
		}
		w.WriteHeader(status)
		n := 10
		if r.Header.Get("X-Big") != "" {
			n = 3000
		}
		_, _ = io.WriteString(w, strings.Repeat("o", n))
	})
	keyMW := mustMiddleware(t)(idemhttp.Idempotency(e, stored...))(handler)
	windowMW := mustMiddleware(t)(idemhttp.Window(e, opts...))(handler)
	tokenMW := mustMiddleware(t)(idemhttp.Token(e, stored...))(handler)
	issuer, err := idemhttp.TokenIssuer(e, opts...)
	require.NoError(t, err)
	var tokens []string
	newToken := func() string {
		tok := issue(t, issuer, principal)
		tokens = append(tokens, tok)
		return tok
	}

	// naming fails op number n (counting from 1, 0 for every one) with an
	// error that names the store key, as backends do.
	naming := func(sentinel error, op string, n int) func(op, k string) (bool, error) {
		seen := 0
		return func(o, k string) (bool, error) {
			if op != "" && o != op {
				return false, nil
			}
			if seen++; n != 0 && seen != n {
				return false, nil
			}
			if sentinel == nil { // a CAS that finds another value: the lease was lost
				return true, nil
			}
			return false, fmt.Errorf("%w: %s on key %q failed", sentinel, o, k)
		}
	}
	var responses []*httptest.ResponseRecorder
	run := func(name string, fault func(op, k string) (bool, error), h http.Handler, q req) {
		fs.set(fault)
		w := serve(h, q)
		fs.set(nil)
		t.Logf("%s: %d %s", name, w.Code, w.Body.String()[:min(w.Body.Len(), 80)])
		responses = append(responses, w)
	}
	for i, f := range []struct {
		name     string
		fault    func() func(op, k string) (bool, error)
		tokenCAS int // the CAS of UseToken to fail: 1 claims, 2 records
	}{
		{"store down", func() func(op, k string) (bool, error) { return naming(store.ErrUnavailable, "", 0) }, 0},
		{"corrupt entry", func() func(op, k string) (bool, error) { return naming(store.ErrCorrupt, "", 0) }, 0},
		{"unexpected store error", func() func(op, k string) (bool, error) { return naming(errors.New("backend said no"), "", 0) }, 0},
		{"result not recorded", func() func(op, k string) (bool, error) { return naming(store.ErrUnavailable, "cas", 0) }, 2},
		{"corrupt on record", func() func(op, k string) (bool, error) { return naming(store.ErrCorrupt, "cas", 0) }, 2},
		{"lease lost", func() func(op, k string) (bool, error) { return naming(nil, "cas", 0) }, 2},
	} {
		keyReq := req{user: principal, key: fmt.Sprint(key, "-", i), body: `{"amount":1}`}
		run(f.name+"/key", f.fault(), keyMW, keyReq)
		run(f.name+"/window", f.fault(), windowMW, req{user: principal, body: f.name})
		fault := f.fault()
		if f.tokenCAS != 0 {
			fault = naming(map[string]error{"lease lost": nil}[f.name], "cas", f.tokenCAS)
			if f.name != "lease lost" {
				fault = naming(map[string]error{"result not recorded": store.ErrUnavailable, "corrupt on record": store.ErrCorrupt}[f.name], "cas", f.tokenCAS)
			}
		}
		run(f.name+"/token", fault, tokenMW, req{user: principal, token: newToken()})
		run(f.name+"/issue", f.fault(), issuer, req{target: "/tokens", user: principal})
	}
	bigReq := req{user: principal, key: key + "-big", header: http.Header{"X-Big": {"1"}}}
	spent := req{user: principal, token: newToken(), header: http.Header{"X-Fail": {"1"}}}
	run("fresh", nil, keyMW, req{user: principal, key: key, body: `{"amount":1}`})
	run("replay", nil, keyMW, req{user: principal, key: key, body: `{"amount":1}`})
	run("mismatch", nil, keyMW, req{user: principal, key: key, body: `{"amount":2}`})
	run("too large", nil, keyMW, bigReq)
	run("too large replay", nil, keyMW, bigReq)
	run("token spent", nil, tokenMW, spent)
	run("token reused", nil, tokenMW, spent)
	run("token of another principal", nil, tokenMW, req{user: "someone-else", token: newToken()})
	forged := newToken()
	run("forged token", nil, tokenMW, req{user: principal, token: forged[:len(forged)-2] + "zz"})
	run("malformed key", nil, keyMW, req{user: principal, header: http.Header{idemhttp.DefaultKeyHeader: {key + " x"}}})
	run("no store", nil, mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngineOn(t, storetest.Unavailable(), engineOpts...), opts...))(handler),
		req{user: principal, key: key})

	secrets := append([]string{principal, key}, tokens...)
	echo := regexp.MustCompile(`"idempotency_key":"[^"]*"`)
	log := logs.String()
	require.Contains(t, log, "idemhttp: unexpected engine outcome", "the error paths ran")
	for _, line := range strings.Split(log, "\n") {
		for _, secret := range secrets {
			assert.NotContains(t, line, secret, "a log line holds a secret")
		}
	}
	for i, w := range responses {
		var text strings.Builder
		for name, vs := range w.Header() {
			fmt.Fprintf(&text, "%s: %s\n", name, strings.Join(vs, ", "))
		}
		text.WriteString(echo.ReplaceAllString(w.Body.String(), `"idempotency_key":"<echo>"`))
		for _, secret := range secrets {
			assert.NotContains(t, text.String(), secret, "response %d holds a secret", i)
		}
	}
}
