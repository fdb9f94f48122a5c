package idemhttp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// keyServer serves a handler that counts its runs and answers 201 with
// the run number, behind Idempotency with opts, on a loopback server.
func keyServer(t *testing.T, opts ...idemhttp.Option) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body", http.StatusInternalServerError)
			return
		}
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"run":%d,"body_len":%d}`, n, len(b))
	})
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), append([]idemhttp.Option{byUser}, opts...)...))
	mux := http.NewServeMux()
	mux.Handle("POST /notify", mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &runs
}

// notify sends body to srv's /notify (plus query) as alice, with header,
// and returns the status, the replay mark and the body.
func notify(t *testing.T, srv *httptest.Server, query, body string, header http.Header) (int, bool, string) {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/notify"+query, strings.NewReader(body))
	require.NoError(t, err)
	r.Header.Set(userHeader, "alice")
	for k, vs := range header {
		r.Header[k] = vs
	}
	resp, err := srv.Client().Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get(idemhttp.ReplayedHeader) == "true", string(b)
}

func TestKeyFromEachSourceReplaysTheFirstAnswer(t *testing.T) {
	sources := []struct {
		name          string
		src           idemhttp.KeySource
		query         string
		first, second string // bodies with the same key
		header        http.Header
	}{
		{name: "JSON", src: idemhttp.KeyFromJSON("data.object.id"),
			first:  `{"data":{"object":{"id":"pi_1","amount":5}}}`,
			second: `{"data":{"object":{"amount":5,"id":"pi_1"}}}`},
		{name: "JSON number", src: idemhttp.KeyFromJSON("out_trade_no"),
			first: `{"out_trade_no":12345}`, second: `{"out_trade_no":1.2345e4}`},
		{name: "header", src: idemhttp.KeyFromHeader("X-GitHub-Delivery"), first: `{}`, second: `{}`,
			header: http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}}},
		{name: "query", src: idemhttp.KeyFromQuery("event"), query: "?event=evt_9", first: `{}`, second: `{}`},
		{name: "func", src: idemhttp.KeyFromFunc(func(r *http.Request, body []byte) (string, error) {
			var v struct{ Resource struct{ ID string } }
			if err := json.Unmarshal(body, &v); err != nil {
				return "", err
			}
			return v.Resource.ID, nil
		}), first: `{"Resource":{"ID":"r-1"}}`, second: `{"Resource":{"ID":"r-1"}}`},
	}
	for _, s := range sources {
		t.Run(s.name, func(t *testing.T) {
			srv, runs := keyServer(t, idemhttp.WithKeyFrom(s.src))
			code, replayed, first := notify(t, srv, s.query, s.first, s.header)
			require.Equal(t, http.StatusCreated, code, first)
			assert.False(t, replayed)
			code, replayed, second := notify(t, srv, s.query, s.second, s.header)
			assert.Equal(t, http.StatusCreated, code)
			assert.True(t, replayed, "the retry is a replay")
			assert.Equal(t, first, second, "the retry gets the first answer")
			assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
		})
	}
}

func TestKeyFromJSONDistinguishesKeysAndRestoresTheBody(t *testing.T) {
	srv, runs := keyServer(t, idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("id")))
	bodyA, bodyB := `{"id":"a","pad":"xxxxxxxx"}`, `{"id":"b"}`
	_, _, a := notify(t, srv, "", bodyA, nil)
	_, _, b := notify(t, srv, "", bodyB, nil)
	assert.Equal(t, fmt.Sprintf(`{"run":1,"body_len":%d}`, len(bodyA)), a, "the handler reads the whole body")
	assert.Equal(t, fmt.Sprintf(`{"run":2,"body_len":%d}`, len(bodyB)), b)
	assert.EqualValues(t, 2, runs.Load())
	// The same key with another payload is another request: 422, as with
	// a header key.
	code, _, _ := notify(t, srv, "", `{"id":"a","pad":"changed"}`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, code)
}

func TestKeyFromBadInput(t *testing.T) {
	srv, runs := keyServer(t, idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("data.id")), idemhttp.WithMaxBody(64))
	cases := []struct {
		name, body string
		status     int
		typ        string
	}{
		{"path absent", `{"data":{}}`, http.StatusBadRequest, idemhttp.ProblemKeyMissing},
		{"object on the way is an array", `{"data":[1]}`, http.StatusBadRequest, idemhttp.ProblemKeyMissing},
		{"non-scalar", `{"data":{"id":{"x":1}}}`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"null", `{"data":{"id":null}}`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"empty string", `{"data":{"id":""}}`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"not printable", `{"data":{"id":"\u0007"}}`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"malformed JSON", `{"data":{"id":"x"}`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"duplicate member", `{"data":{"id":"x","id":"y"}}`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"not JSON", `data.id=x`, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"empty body", ``, http.StatusBadRequest, idemhttp.ProblemKeyInvalid},
		{"oversized body", `{"data":{"id":"x"},"pad":"` + strings.Repeat("p", 64) + `"}`, http.StatusRequestEntityTooLarge, idemhttp.ProblemBodyTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := notify(t, srv, "", c.body, nil)
			require.Equal(t, c.status, code, body)
			var p idemhttp.Problem
			require.NoError(t, json.Unmarshal([]byte(body), &p), body)
			assert.Equal(t, c.typ, p.Type)
			if c.typ != idemhttp.ProblemBodyTooLarge {
				assert.Contains(t, p.Detail, "data.id", "the detail names the path")
			}
			assert.NotContains(t, p.Detail, `"x"`, "the detail never quotes the body")
		})
	}
	assert.Zero(t, runs.Load(), "no bad request reached the handler")
}

func TestKeyFromQueryAndHeaderBadInput(t *testing.T) {
	q, qruns := keyServer(t, idemhttp.WithKeyFrom(idemhttp.KeyFromQuery("event")))
	for _, c := range []struct {
		query string
		typ   string
	}{
		{"", idemhttp.ProblemKeyMissing},
		{"?other=1", idemhttp.ProblemKeyMissing},
		{"?event=a&event=b", idemhttp.ProblemKeyInvalid},
		{"?event=", idemhttp.ProblemKeyInvalid},
		{"?event=" + strings.Repeat("k", idemhttp.MaxKeyLen+1), idemhttp.ProblemKeyInvalid},
	} {
		code, _, body := notify(t, q, c.query, `{}`, nil)
		assert.Equal(t, http.StatusBadRequest, code, c.query)
		assert.Contains(t, body, c.typ, c.query)
	}
	assert.Zero(t, qruns.Load())

	h, hruns := keyServer(t, idemhttp.WithKeyFrom(idemhttp.KeyFromHeader("X-Delivery")))
	code, _, body := notify(t, h, "", `{}`, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, idemhttp.ProblemKeyMissing)
	code, _, body = notify(t, h, "", `{}`, http.Header{"X-Delivery": {"a", "b"}})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, idemhttp.ProblemKeyInvalid)
	assert.Zero(t, hruns.Load())
}

func TestKeyFromFuncErrorIsNotSent(t *testing.T) {
	srv, runs := keyServer(t, idemhttp.WithKeyFrom(idemhttp.KeyFromFunc(func(*http.Request, []byte) (string, error) {
		return "", errors.New("secret-internal-detail")
	})))
	code, _, body := notify(t, srv, "", `{}`, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, idemhttp.ProblemKeyInvalid)
	assert.NotContains(t, body, "secret-internal-detail")
	assert.Zero(t, runs.Load())
}

func TestKeyFromOptionalKeyPassesTheBodyThrough(t *testing.T) {
	srv, runs := keyServer(t, idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("id")), idemhttp.WithOptionalKey())
	code, replayed, body := notify(t, srv, "", `{"other":1}`, nil)
	assert.Equal(t, http.StatusCreated, code)
	assert.False(t, replayed)
	assert.Equal(t, `{"run":1,"body_len":11}`, body, "an unguarded request gets its body")
	notify(t, srv, "", `{"other":1}`, nil)
	assert.EqualValues(t, 2, runs.Load(), "requests without a key are not deduplicated")
}

// TestKeyFromJSONRace races many requests with one body key: the handler
// runs once; with WithWait every request gets the first answer, without
// it the others get the first answer or 409.
func TestKeyFromJSONRace(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			opts := []idemhttp.Option{idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("id"))}
			if wait {
				opts = append(opts, idemhttp.WithWait(0))
			}
			srv, runs := keyServer(t, opts...)
			const n = 64
			var wg sync.WaitGroup
			codes := make([]int, n)
			bodies := make([]string, n)
			for i := range n {
				wg.Go(func() {
					r, err := http.NewRequest(http.MethodPost, srv.URL+"/notify", strings.NewReader(`{"id":"txn-42"}`))
					if err != nil {
						t.Error(err)
						return
					}
					r.Header.Set(userHeader, "alice")
					resp, err := srv.Client().Do(r)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					codes[i], bodies[i] = resp.StatusCode, string(b)
				})
			}
			wg.Wait()
			assert.EqualValues(t, 1, runs.Load(), "one handler run for one key")
			for i := range n {
				switch {
				case codes[i] == http.StatusCreated:
					assert.Equal(t, `{"run":1,"body_len":15}`, bodies[i])
				case codes[i] == http.StatusConflict && !wait:
					assert.Contains(t, bodies[i], idemhttp.ProblemInProgress)
				default:
					t.Errorf("request %d: %d %s", i, codes[i], bodies[i])
				}
			}
		})
	}
}
