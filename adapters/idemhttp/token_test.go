package idemhttp_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// tokenMux serves a TokenIssuer and, with opts, Token; the options are
// Token's own, which the issuer would refuse.
func tokenMux(t testing.TB, e *idemkit.Engine, a http.Handler, opts ...idemhttp.Option) *http.ServeMux {
	mw := mustMiddleware(t)(idemhttp.Token(e, append([]idemhttp.Option{byUser}, opts...)...))
	iss, err := idemhttp.TokenIssuer(e, byUser)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /tokens", iss)
	mux.Handle("POST /orders", mw(a))
	mux.Handle("GET /orders", mw(a))
	return mux
}

func issue(t testing.TB, mux http.Handler, user string) string {
	w := serve(mux, req{target: "/tokens", user: user})
	require.Equal(t, http.StatusCreated, w.Code, "body: %s", w.Body)
	var tok idemhttp.IssuedToken
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &tok))
	return tok.Token
}

func TestTokenIssuer(t *testing.T) {
	mux := tokenMux(t, testkit.NewEngine(t, idemkit.WithTokenTTL(90*time.Second)), &api{})
	w := serve(mux, req{target: "/tokens", user: "alice"})
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Len(t, body, 2)
	assert.Len(t, body["token"], 43)
	assert.EqualValues(t, 90, body["expires_in"])
	requireProblem(t, serve(mux, req{target: "/tokens"}), 401, idemhttp.ProblemUnauthenticated)
}

func TestTokenStatusPaths(t *testing.T) {
	tests := []struct {
		name    string
		run     func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder
		status  int
		problem string
		replay  bool
		runs    int32
	}{
		{name: "first use runs", status: 201, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{user: "alice", token: issue(t, mux, "alice")})
		}},
		{name: "sf-string token", status: 201, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{user: "alice", token: `"` + issue(t, mux, "alice") + `"`})
		}},
		{name: "reuse replays the stored outcome", status: 201, replay: true, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			q := req{user: "alice", token: issue(t, mux, "alice"), body: "a=1"}
			serve(mux, q)
			return serve(mux, q)
		}},
		{name: "reuse after a 500 is 409", status: 409, problem: idemhttp.ProblemTokenUsed, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			tok := issue(t, mux, "alice")
			require.Equal(t, 500, serve(mux, req{user: "alice", token: tok, header: http.Header{"X-Status": {"500"}}}).Code)
			return serve(mux, req{user: "alice", token: tok})
		}},
		{name: "missing token is 400", status: 400, problem: idemhttp.ProblemTokenMissing, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{user: "alice"})
		}},
		{name: "malformed token header is 400", status: 400, problem: idemhttp.ProblemTokenInvalid, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{user: "alice", token: `"open`})
		}},
		{name: "forged token is 400", status: 400, problem: idemhttp.ProblemTokenInvalid, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			tok := issue(t, mux, "alice")
			last := "A"
			if strings.HasSuffix(tok, "A") {
				last = "B"
			}
			forged := tok[:len(tok)-1] + last
			return serve(mux, req{user: "alice", token: forged})
		}},
		{name: "garbage token is 400", status: 400, problem: idemhttp.ProblemTokenInvalid, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{user: "alice", token: "not-a-token"})
		}},
		{name: "other principal's token is 400 and stays usable", status: 201, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			tok := issue(t, mux, "alice")
			requireProblem(t, serve(mux, req{user: "bob", token: tok}), 400, idemhttp.ProblemTokenInvalid)
			return serve(mux, req{user: "alice", token: tok})
		}},
		{name: "replay goes to the same principal only", status: 400, problem: idemhttp.ProblemTokenInvalid, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			tok := issue(t, mux, "alice")
			require.Equal(t, 201, serve(mux, req{user: "alice", token: tok}).Code)
			return serve(mux, req{user: "bob", token: tok})
		}},
		{name: "no principal is 401", status: 401, problem: idemhttp.ProblemUnauthenticated, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{token: issue(t, mux, "alice")})
		}},
		{name: "GET needs no token", status: 201, runs: 1, run: func(t *testing.T, mux http.Handler) *httptest.ResponseRecorder {
			return serve(mux, req{method: "GET", user: "alice"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &api{}
			w := tc.run(t, tokenMux(t, testkit.NewEngine(t), a))
			if tc.problem != "" {
				requireProblem(t, w, tc.status, tc.problem)
			} else {
				require.Equal(t, tc.status, w.Code, "body: %s", w.Body)
				assert.Equal(t, tc.replay, isReplay(w))
			}
			assert.Equal(t, tc.runs, a.runs.Load())
		})
	}
}

func TestTokenConcurrentUsesRunOnce(t *testing.T) {
	a := &api{delay: 5 * time.Millisecond}
	mux := tokenMux(t, testkit.NewEngine(t), a)
	tok := issue(t, mux, "alice")
	const n = 50
	results := make([]*httptest.ResponseRecorder, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			r := req{user: "alice", token: tok}.build()
			start.Wait()
			results[i] = httptest.NewRecorder()
			mux.ServeHTTP(results[i], r)
		})
	}
	start.Done()
	wg.Wait()
	fresh := 0
	for _, w := range results {
		switch {
		case w.Code == http.StatusConflict:
			requireProblem(t, w, 409, idemhttp.ProblemInProgress)
		case w.Code == http.StatusCreated && !isReplay(w):
			fresh++
		default:
			assert.Equal(t, 201, w.Code)
		}
	}
	assert.Equal(t, 1, fresh)
	assert.EqualValues(t, 1, a.runs.Load())
}

func TestTokenCustomHeader(t *testing.T) {
	a := &api{}
	mux := tokenMux(t, testkit.NewEngine(t), a, idemhttp.WithTokenHeader("X-Form-Token"))
	tok := issue(t, mux, "alice")
	requireProblem(t, serve(mux, req{user: "alice", token: tok}), 400, idemhttp.ProblemTokenMissing)
	w := serve(mux, req{user: "alice", header: http.Header{"X-Form-Token": {tok}}})
	assert.Equal(t, 201, w.Code)
}

// formRequest builds a POST of an HTML form to /orders, URL-encoded or
// multipart, with the fields in order.
func formRequest(t *testing.T, multipartForm bool, user string, fields ...[2]string) *http.Request {
	var body bytes.Buffer
	contentType := "application/x-www-form-urlencoded"
	if multipartForm {
		mw := multipart.NewWriter(&body)
		for _, f := range fields {
			require.NoError(t, mw.WriteField(f[0], f[1]))
		}
		fw, err := mw.CreateFormFile("upload", "a.txt")
		require.NoError(t, err)
		_, _ = fw.Write([]byte("file bytes"))
		require.NoError(t, mw.Close())
		contentType = mw.FormDataContentType()
	} else {
		q := url.Values{}
		for _, f := range fields {
			q.Add(f[0], f[1])
		}
		body.WriteString(q.Encode())
	}
	r := httptest.NewRequest(http.MethodPost, "/orders", &body)
	r.Header.Set("Content-Type", contentType)
	r.Header.Set(userHeader, user)
	return r
}

// formEcho parses the form as a handler would and echoes its fields.
var formEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(1 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, "cart=%s token=%s", r.PostFormValue("cart"), r.PostFormValue("idem_token"))
})

func TestTokenFromFormField(t *testing.T) {
	for _, multipartForm := range []bool{false, true} {
		t.Run(fmt.Sprint("multipart=", multipartForm), func(t *testing.T) {
			e := testkit.NewEngine(t)
			mux := tokenMux(t, e, formEcho, idemhttp.WithTokenField("idem_token"))
			tok := issue(t, mux, "alice")
			send := func(fields ...[2]string) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, formRequest(t, multipartForm, "alice", fields...))
				return w
			}
			w := send([2]string{"cart", "42"}, [2]string{"idem_token", tok})
			require.Equal(t, 201, w.Code, "body %s", w.Body)
			assert.Equal(t, "cart=42 token="+tok, w.Body.String(), "the handler reads the whole form")
			again := send([2]string{"cart", "42"}, [2]string{"idem_token", tok})
			assert.True(t, isReplay(again), "a resubmitted form replays")
			requireProblem(t, send([2]string{"cart", "42"}), 400, idemhttp.ProblemTokenMissing)
			requireProblem(t, send([2]string{"idem_token", tok}, [2]string{"idem_token", tok}), 400, idemhttp.ProblemTokenInvalid)
			requireProblem(t, send([2]string{"idem_token", "forged-0123456789abcdef"}), 400, idemhttp.ProblemTokenInvalid)
		})
	}
}

func TestTokenFormFieldHeaderWinsAndLimits(t *testing.T) {
	a := &api{}
	mux := tokenMux(t, testkit.NewEngine(t), a, idemhttp.WithTokenField("idem_token"), idemhttp.WithMaxBody(64))
	tok := issue(t, mux, "alice")
	r := formRequest(t, false, "alice", [2]string{"idem_token", "forged-0123456789abcdef"})
	r.Header.Set(idemhttp.DefaultTokenHeader, tok)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	assert.Equal(t, 201, w.Code, "the header wins: %s", w.Body)

	big := formRequest(t, false, "alice", [2]string{"idem_token", issue(t, mux, "alice")}, [2]string{"pad", strings.Repeat("x", 64)})
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, big)
	requireProblem(t, w, 413, idemhttp.ProblemBodyTooLarge)

	plain := tokenMux(t, testkit.NewEngine(t), a)
	w = httptest.NewRecorder()
	plain.ServeHTTP(w, formRequest(t, false, "alice", [2]string{"idem_token", issue(t, plain, "alice")}))
	requireProblem(t, w, 400, idemhttp.ProblemTokenMissing)
	assert.EqualValues(t, 1, a.runs.Load())

	_, err := idemhttp.Token(testkit.NewEngine(t), byUser, idemhttp.WithTokenField(""))
	assert.ErrorIs(t, err, idemkit.ErrInvalid)
}

func TestTokenFormFieldConcurrentUsesRunOnce(t *testing.T) {
	var runs atomic.Int32
	mux := tokenMux(t, testkit.NewEngine(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		formEcho(w, r)
	}), idemhttp.WithTokenField("idem_token"), idemhttp.WithWait(time.Millisecond))
	tok := issue(t, mux, "alice")
	const n = 50
	results := make([]*httptest.ResponseRecorder, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		r := formRequest(t, i%2 == 0, "alice", [2]string{"cart", "42"}, [2]string{"idem_token", tok})
		wg.Go(func() {
			start.Wait()
			results[i] = httptest.NewRecorder()
			mux.ServeHTTP(results[i], r)
		})
	}
	start.Done()
	wg.Wait()
	fresh := 0
	for _, w := range results {
		require.Equal(t, 201, w.Code, "body %s", w.Body)
		assert.Equal(t, "cart=42 token="+tok, w.Body.String())
		if !isReplay(w) {
			fresh++
		}
	}
	assert.Equal(t, 1, fresh)
	assert.EqualValues(t, 1, runs.Load())
}
