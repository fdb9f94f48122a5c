package idemhttp_test

import (
	"context"
	"errors"
	"io"
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

// dropFirst runs the first request's handler to completion, then throws
// its response away and closes the connection: the client never hears
// back, although the work was done.
func dropFirst(next http.Handler) (http.Handler, *atomic.Int32) {
	var requests atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(discardWriter{h: http.Header{}}, r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.Close()
	}), &requests
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}

func TestTransportRetriesADroppedResponse(t *testing.T) {
	a := &api{}
	mux := keyMux(t, testkit.NewEngine(t), a)
	h, requests := dropFirst(mux)
	srv := httptest.NewServer(h)
	defer srv.Close()

	var errs atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := srv.Client().Transport.RoundTrip(r)
		if err != nil {
			errs.Add(1)
		}
		return resp, err
	})
	client := &http.Client{Transport: &idemhttp.Transport{Base: base, MinBackoff: time.Millisecond}}
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"sku":"x"}`))
	require.NoError(t, err)
	r.Header.Set(userHeader, "alice")
	resp, err := client.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	assert.EqualValues(t, 1, a.runs.Load(), "the handler ran once")
	assert.EqualValues(t, 2, requests.Load(), "the server saw the retry")
	assert.EqualValues(t, 1, errs.Load(), "the first attempt failed on the network")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get(idemhttp.ReplayedHeader))
	assert.Equal(t, `{"run":1,"pattern":"POST /orders","body":"{\"sku\":\"x\"}"}`, string(body))
	assert.Empty(t, r.Header.Get(idemhttp.DefaultKeyHeader), "the caller's request is not modified")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// script is a fake base transport that answers attempts in order and
// records what each attempt carried.
type script struct {
	mu      sync.Mutex
	answers []func() (*http.Response, error)
	keys    []string
	bodies  []string
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	s.keys = append(s.keys, r.Header.Get(idemhttp.DefaultKeyHeader))
	s.bodies = append(s.bodies, string(body))
	i := min(len(s.keys)-1, len(s.answers)-1)
	return s.answers[i]()
}

func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

var errNet = errors.New("connection reset by peer")

func netErr() (*http.Response, error) { return nil, errNet }

func status(code int, header http.Header, body string) func() (*http.Response, error) {
	return func() (*http.Response, error) {
		if header == nil {
			header = http.Header{}
		}
		return &http.Response{StatusCode: code, Header: header, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

func problemHeader(retry string) http.Header {
	h := http.Header{"Content-Type": {idemhttp.ProblemContentType}}
	if retry != "" {
		h.Set("Retry-After", retry)
	}
	return h
}

func TestTransportRetries(t *testing.T) {
	inProgress := `{"type":"` + idemhttp.ProblemInProgress + `","title":"t","status":409}`
	duplicate := `{"type":"` + idemhttp.ProblemDuplicate + `","title":"t","status":409}`
	ok := status(201, nil, "done")
	tests := []struct {
		name     string
		tr       idemhttp.Transport
		method   string
		body     io.Reader
		key      string
		answers  []func() (*http.Response, error)
		attempts int
		status   int // 0: an error is expected
		respBody string
	}{
		{name: "network error then success", method: "POST", body: strings.NewReader("b"), answers: []func() (*http.Response, error){netErr, ok}, attempts: 2, status: 201, respBody: "done"},
		{name: "503 then success", method: "POST", answers: []func() (*http.Response, error){status(503, http.Header{"Retry-After": {"0"}}, ""), ok}, attempts: 2, status: 201},
		{name: "in-progress 409 then success", method: "PATCH", body: strings.NewReader("b"),
			answers: []func() (*http.Response, error){status(409, problemHeader("0"), inProgress), ok}, attempts: 2, status: 201},
		{name: "plain 409 with Retry-After is retried", method: "POST",
			answers: []func() (*http.Response, error){status(409, http.Header{"Retry-After": {"0"}}, "busy"), ok}, attempts: 2, status: 201},
		{name: "plain 409 without Retry-After is returned", method: "POST",
			answers: []func() (*http.Response, error){status(409, nil, "conflict"), ok}, attempts: 1, status: 409, respBody: "conflict"},
		{name: "window duplicate 409 is returned with its body", method: "POST",
			answers: []func() (*http.Response, error){status(409, problemHeader("3"), duplicate), ok}, attempts: 1, status: 409, respBody: duplicate},
		{name: "Retry-After over MaxBackoff ends the retries", method: "POST", tr: idemhttp.Transport{MaxBackoff: time.Second},
			answers: []func() (*http.Response, error){status(503, http.Header{"Retry-After": {"2"}}, "down"), ok}, attempts: 1, status: 503, respBody: "down"},
		{name: "422 is not retried", method: "POST", answers: []func() (*http.Response, error){status(422, nil, "x"), ok}, attempts: 1, status: 422},
		{name: "retries are bounded", method: "POST", tr: idemhttp.Transport{MaxRetries: 2}, answers: []func() (*http.Response, error){netErr}, attempts: 3},
		{name: "NoRetries disables retries", method: "POST", tr: idemhttp.Transport{MaxRetries: idemhttp.NoRetries}, answers: []func() (*http.Response, error){netErr, ok}, attempts: 1},
		{name: "POST without a key is never retried", method: "POST", tr: idemhttp.Transport{Methods: []string{}},
			answers: []func() (*http.Response, error){netErr, ok}, attempts: 1},
		{name: "POST with the caller's key is retried", method: "POST", key: "mine", tr: idemhttp.Transport{Methods: []string{}},
			answers: []func() (*http.Response, error){netErr, ok}, attempts: 2, status: 201},
		{name: "a body without GetBody is not retried", method: "POST", body: io.MultiReader(strings.NewReader("b")),
			answers: []func() (*http.Response, error){netErr, ok}, attempts: 1},
		{name: "GET is retried without a key", method: "GET", answers: []func() (*http.Response, error){netErr, ok}, attempts: 2, status: 201},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{answers: tc.answers}
			tr := tc.tr
			tr.Base = s
			tr.MinBackoff = time.Millisecond
			r, err := http.NewRequest(tc.method, "http://example.test/orders", tc.body)
			require.NoError(t, err)
			if tc.key != "" {
				r.Header.Set(idemhttp.DefaultKeyHeader, tc.key)
			}
			resp, err := tr.RoundTrip(r)
			assert.Equal(t, tc.attempts, s.attempts())
			if tc.status == 0 {
				require.ErrorIs(t, err, errNet)
				assert.Nil(t, resp)
				return
			}
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
			if tc.respBody != "" {
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, tc.respBody, string(b))
			}
			for i := 1; i < len(s.keys); i++ {
				assert.Equal(t, s.keys[0], s.keys[i], "the key is kept across retries")
				assert.Equal(t, s.bodies[0], s.bodies[i], "the body is replayed")
			}
		})
	}
}

func TestTransportAddsAKey(t *testing.T) {
	s := &script{answers: []func() (*http.Response, error){netErr, netErr, status(201, nil, "")}}
	tr := &idemhttp.Transport{Base: s, MinBackoff: time.Millisecond}
	for _, method := range []string{"POST", "PATCH", "PUT", "GET"} {
		s.keys = nil
		r, err := http.NewRequest(method, "http://example.test/", strings.NewReader("payload"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Len(t, s.keys, 3)
		assert.Equal(t, []string{"payload", "payload", "payload"}, s.bodies[len(s.bodies)-3:])
		if method == "POST" || method == "PATCH" {
			assert.Regexp(t, `^"[A-Za-z0-9_-]{43}"$`, s.keys[0], "an sf-string holding a 256-bit token")
			assert.Equal(t, []string{s.keys[0], s.keys[0], s.keys[0]}, s.keys)
		} else {
			assert.Equal(t, []string{"", "", ""}, s.keys, "%s gets no key", method)
		}
		assert.Empty(t, r.Header.Get(idemhttp.DefaultKeyHeader), "the caller's request is not modified")
	}

	custom := &idemhttp.Transport{Base: s, KeyHeader: "X-Key", NewKey: func() (string, error) { return `a"b\c`, nil }}
	var got string
	custom.Base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get("X-Key")
		return status(200, nil, "")()
	})
	resp, err := custom.RoundTrip(httptest.NewRequest("POST", "http://example.test/", nil))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, `"a\"b\\c"`, got)

	failing := &idemhttp.Transport{Base: s, NewKey: func() (string, error) { return "", errors.New("no entropy") }}
	_, err = failing.RoundTrip(httptest.NewRequest("POST", "http://example.test/", nil))
	assert.ErrorContains(t, err, "no entropy")
}

func TestTransportStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &script{answers: []func() (*http.Response, error){func() (*http.Response, error) {
		cancel()
		return nil, errNet
	}}}
	tr := &idemhttp.Transport{Base: s, MinBackoff: time.Hour, MaxBackoff: time.Hour}
	r, err := http.NewRequestWithContext(ctx, "POST", "http://example.test/", strings.NewReader("b"))
	require.NoError(t, err)
	_, err = tr.RoundTrip(r)
	require.ErrorIs(t, err, errNet)
	assert.Equal(t, 1, s.attempts(), "no retry once the context is done")

	ctx2, cancel2 := context.WithCancel(context.Background())
	s2 := &script{answers: []func() (*http.Response, error){status(503, nil, "")}}
	tr2 := &idemhttp.Transport{Base: s2, MinBackoff: time.Hour, MaxBackoff: time.Hour}
	r2, err := http.NewRequestWithContext(ctx2, "POST", "http://example.test/", nil)
	require.NoError(t, err)
	go func() {
		require.Eventually(t, func() bool { return s2.attempts() == 1 }, 5*time.Second, time.Millisecond)
		cancel2()
	}()
	_, err = tr2.RoundTrip(r2)
	require.ErrorIs(t, err, context.Canceled, "the backoff wait ends with the context")
	assert.Equal(t, 1, s2.attempts())
}

// TestTransportWaitsForAnInProgressFirstAttempt runs the transport against
// the middleware: the first attempt is slow and the client gives up on it
// (its own timeout), the retry gets 409 in-progress, waits Retry-After and
// gets the replay.
func TestTransportWaitsForAnInProgressFirstAttempt(t *testing.T) {
	a := &api{gate: make(chan struct{})}
	srv := httptest.NewServer(keyMux(t, testkit.NewEngine(t), a))
	defer srv.Close()
	var attempts atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if attempts.Add(1) == 1 {
			// The first attempt reaches the handler, then the client
			// stops waiting for it.
			ctx, cancel := context.WithCancel(r.Context())
			go func() {
				for end := time.Now().Add(5 * time.Second); a.runs.Load() == 0 && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
			return srv.Client().Transport.RoundTrip(r.WithContext(ctx))
		}
		resp, err := srv.Client().Transport.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusConflict {
			close(a.gate) // let the first request finish while the client waits
		}
		return resp, err
	})
	client := &http.Client{Transport: &idemhttp.Transport{Base: base, MinBackoff: time.Millisecond}}
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
	require.NoError(t, err)
	r.Header.Set(userHeader, "alice")
	resp, err := client.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get(idemhttp.ReplayedHeader))
	assert.EqualValues(t, 1, a.runs.Load())
	assert.EqualValues(t, 3, attempts.Load(), "cancelled, 409, replay")
}

// A request with a nil Header is valid for http.Transport; the Transport
// must not panic adding a key to it.
func TestTransportNilHeader(t *testing.T) {
	var got string
	tr := &idemhttp.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get(idemhttp.DefaultKeyHeader)
		return status(201, nil, "")()
	})}
	u, err := url.Parse("http://example.test/orders")
	require.NoError(t, err)
	var resp *http.Response
	require.NotPanics(t, func() { resp, err = tr.RoundTrip(&http.Request{Method: http.MethodPost, URL: u}) })
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.NotEmpty(t, got)
}

// closeCounter is a response body that records whether it was closed.
type closeCounter struct {
	io.Reader
	closed *atomic.Int32
}

func (c closeCounter) Close() error { c.closed.Add(1); return nil }

// Every response the transport does not return is closed; the returned
// one is not.
func TestTransportClosesDiscardedResponses(t *testing.T) {
	var closed, attempts atomic.Int32
	tr := &idemhttp.Transport{MinBackoff: time.Millisecond, MaxRetries: 3,
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			if r.Body != nil {
				_, _ = io.Copy(io.Discard, r.Body)
				_ = r.Body.Close()
			}
			return &http.Response{StatusCode: 503, Header: http.Header{},
				Body: closeCounter{strings.NewReader("down"), &closed}}, nil
		})}
	r, err := http.NewRequest(http.MethodPost, "http://example.test/", strings.NewReader("b"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(r)
	require.NoError(t, err)
	assert.EqualValues(t, 4, attempts.Load())
	assert.EqualValues(t, 3, closed.Load(), "the three discarded responses are closed")
	_ = resp.Body.Close()
	assert.EqualValues(t, 4, closed.Load())
}

// The transport knows an in-progress 409 by its type name under any
// problem base (WithProblemBase), and no other 409 problem.
func TestTransportRecognisesInProgressUnderAnyBase(t *testing.T) {
	for typ, retried := range map[string]bool{
		idemhttp.ProblemInProgress:                        true,
		"https://docs.example.com/errors/in-progress":     true,
		"urn:example:problems:in-progress":                true,
		"https://docs.example.com/errors/#in-progress":    true,
		"https://docs.example.com/errors/not-in-progress": false,
		"in-progress":                 false,
		idemhttp.ProblemPayloadReused: false,
		idemhttp.ProblemDuplicate:     false,
	} {
		var attempts atomic.Int32
		tr := &idemhttp.Transport{MinBackoff: time.Millisecond, MaxRetries: 1,
			Base: roundTripFunc(func(*http.Request) (*http.Response, error) {
				if attempts.Add(1) > 1 {
					return status(201, nil, "done")()
				}
				return status(409, problemHeader(""), `{"type":"`+typ+`","status":409}`)()
			})}
		r, err := http.NewRequest(http.MethodPost, "http://example.test/", strings.NewReader("b"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, retried, attempts.Load() == 2, typ)
	}
}

// closeTracker is a request body that records whether it was closed.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

// An invalid field is neither clamped nor replaced by its default:
// Validate and RoundTrip return an error wrapping idemkit.ErrInvalid that
// names the field, and RoundTrip sends nothing and closes the body.
func TestTransportRefusesInvalidFields(t *testing.T) {
	bad := map[string]idemhttp.Transport{
		"MaxRetries below NoRetries":     {MaxRetries: -2},
		"MinBackoff negative":            {MinBackoff: -time.Millisecond},
		"MaxBackoff negative":            {MaxBackoff: -time.Second},
		"MinBackoff over MaxBackoff":     {MinBackoff: 2 * time.Second, MaxBackoff: time.Second},
		"MinBackoff over the default":    {MinBackoff: idemhttp.DefaultMaxBackoff + 1},
		"MaxBackoff under the default":   {MaxBackoff: idemhttp.DefaultMinBackoff - 1},
		"KeyHeader not a header name":    {KeyHeader: "Idempotency Key"},
		"Methods holding an invalid one": {Methods: []string{"POST", "PO ST"}},
		"FenceHeader not a header name":  {FenceHeader: "Idempotency Fence"},
		"FenceHeader the key header":     {FenceHeader: "idempotency-key"},
		"FenceHeader the set key header": {KeyHeader: "X-Key", FenceHeader: "x-key"},
	}
	field := func(why string) string { return strings.Fields(why)[0] }
	for why, tr := range bad {
		t.Run(why, func(t *testing.T) {
			s := &script{answers: []func() (*http.Response, error){status(201, nil, "")}}
			tr.Base = s
			err := tr.Validate()
			require.ErrorIs(t, err, idemkit.ErrInvalid)
			assert.Contains(t, err.Error(), field(why))
			body := &closeTracker{Reader: strings.NewReader("payload")}
			r := httptest.NewRequest("POST", "http://example.test/", body)
			resp, err := tr.RoundTrip(r)
			assert.Nil(t, resp)
			require.ErrorIs(t, err, idemkit.ErrInvalid)
			assert.Contains(t, err.Error(), field(why))
			assert.Zero(t, s.attempts(), "nothing is sent")
			assert.True(t, body.closed.Load(), "RoundTrip closes the body, as http.RoundTripper requires")
		})
	}
	for why, tr := range map[string]idemhttp.Transport{
		"zero value":   {},
		"NoRetries":    {MaxRetries: idemhttp.NoRetries},
		"no methods":   {Methods: []string{}},
		"equal bounds": {MinBackoff: time.Second, MaxBackoff: time.Second},
		"fence header": {FenceHeader: idemhttp.FenceHeader},
	} {
		assert.NoError(t, tr.Validate(), why)
	}
}
