package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/idemkit/idemkit/keying"
)

// callbackServer serves POST /notify behind Idempotency with the callback
// profile, keyed by the body member "txn", as alice. status picks the
// handler's answer for its nth run (from 1).
func callbackServer(t *testing.T, e *idemkit.Engine, status func(n int64) int, opts ...idemhttp.Option) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status(n))
		fmt.Fprintf(w, `{"run":%d}`, n)
	})
	base := []idemhttp.Option{byUser, idemhttp.Callback(0), idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("txn"))}
	mw := mustMiddleware(t)(idemhttp.Idempotency(e, append(base, opts...)...))
	mux := http.NewServeMux()
	mux.Handle("POST /notify", mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &runs
}

func always(code int) func(int64) int { return func(int64) int { return code } }

func TestCallbackAnswersDuplicatesWithTheFirst2xx(t *testing.T) {
	srv, runs := callbackServer(t, testkit.NewEngine(t), always(http.StatusOK))
	code, replayed, first := notify(t, srv, "", `{"txn":"T1","sent_at":1}`, nil)
	require.Equal(t, http.StatusOK, code)
	assert.False(t, replayed)
	// Retries that changed a send time or the query are the same event.
	for i, body := range []string{`{"txn":"T1","sent_at":2}`, `{"sent_at":3,"txn":"T1","attempt":4}`} {
		code, replayed, got := notify(t, srv, fmt.Sprintf("?attempt=%d", i), body, nil)
		assert.Equal(t, http.StatusOK, code)
		assert.True(t, replayed)
		assert.Equal(t, first, got)
	}
	assert.EqualValues(t, 1, runs.Load())
}

func TestCallbackStoresOnly2xx(t *testing.T) {
	for _, failed := range []int{http.StatusInternalServerError, http.StatusBadRequest, http.StatusConflict, http.StatusFound, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(failed), func(t *testing.T) {
			srv, runs := callbackServer(t, testkit.NewEngine(t), func(n int64) int {
				if n == 1 {
					return failed
				}
				return http.StatusNoContent
			})
			code, _, _ := notify(t, srv, "", `{"txn":"T2"}`, nil)
			assert.Equal(t, failed, code)
			code, replayed, _ := notify(t, srv, "", `{"txn":"T2"}`, nil)
			assert.Equal(t, http.StatusNoContent, code, "the failed callback's retry runs the handler again")
			assert.False(t, replayed)
			code, replayed, _ = notify(t, srv, "", `{"txn":"T2"}`, nil)
			assert.Equal(t, http.StatusNoContent, code)
			assert.True(t, replayed)
			assert.EqualValues(t, 2, runs.Load())
		})
	}
}

func TestCallbackWithIncludeRefusesAnotherEvent(t *testing.T) {
	srv, runs := callbackServer(t, testkit.NewEngine(t), always(http.StatusOK), idemhttp.WithInclude("amount"))
	notify(t, srv, "", `{"txn":"T3","amount":5,"sent_at":1}`, nil)
	code, replayed, _ := notify(t, srv, "", `{"txn":"T3","amount":5,"sent_at":2}`, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, replayed, "a member outside the include list may change")
	code, _, body := notify(t, srv, "", `{"txn":"T3","amount":6,"sent_at":1}`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, code)
	assert.Contains(t, body, idemhttp.ProblemKeyMismatch)
	assert.EqualValues(t, 1, runs.Load())
}

func TestCallbackRefusesAMissingOrMalformedKey(t *testing.T) {
	srv, runs := callbackServer(t, testkit.NewEngine(t), always(http.StatusOK))
	for _, c := range []struct{ body, typ string }{
		{`{"id":"T4"}`, idemhttp.ProblemKeyMissing},
		{`{"txn":["T4"]}`, idemhttp.ProblemKeyInvalid},
		{`{"txn":"T4"`, idemhttp.ProblemKeyInvalid},
		{``, idemhttp.ProblemKeyInvalid},
	} {
		code, _, body := notify(t, srv, "", c.body, nil)
		assert.Equal(t, http.StatusBadRequest, code, c.body)
		assert.Contains(t, body, c.typ, c.body)
	}
	assert.Zero(t, runs.Load())
}

func TestCallbackRetention(t *testing.T) {
	for _, c := range []struct {
		retention, atLeast time.Duration
	}{
		{0, idemhttp.DefaultCallbackRetention - time.Minute},
		{30 * 24 * time.Hour, 30*24*time.Hour - time.Minute},
		{time.Hour, time.Hour - time.Minute},
	} {
		e := testkit.NewEngine(t)
		var runs atomic.Int64
		mw := mustMiddleware(t)(idemhttp.Idempotency(e, byUser, idemhttp.Callback(c.retention), idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("txn"))))
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) })))
		code, _, _ := notify(t, srv, "", `{"txn":"T5"}`, nil)
		srv.Close()
		require.Equal(t, http.StatusOK, code)
		info, err := e.Inspect(context.Background(), idemkit.ModeDo, keying.Key("http", "T5"), idemkit.WithScope("alice"))
		require.NoError(t, err)
		assert.Equal(t, idemkit.StateCompleted, info.State)
		assert.GreaterOrEqual(t, info.TTL, c.atLeast, "retention %v", c.retention)
		assert.LessOrEqual(t, info.TTL, c.atLeast+2*time.Minute, "retention %v", c.retention)
	}
}

// TestCallbackConcurrentDuplicatesWait holds the first callback in its
// handler until every duplicate has reached the server: all get the first
// 2xx answer, none a 409.
func TestCallbackConcurrentDuplicatesWait(t *testing.T) {
	const n = 48
	var arrived, runs atomic.Int64
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		<-release
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "handled")
	})
	mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.Callback(0),
		idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("txn"))))
	guarded := mw(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		guarded.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	codes := make([]int, n)
	bodies := make([]string, n)
	for i := range n {
		wg.Go(func() { codes[i], _, bodies[i] = notifyNoT(srv, `{"txn":"T6"}`) })
	}
	testkit.WaitFor(t, "every duplicate arrived and one handler run started", func() bool { return arrived.Load() == n && runs.Load() == 1 })
	close(release)
	wg.Wait()
	assert.EqualValues(t, 1, runs.Load())
	for i := range n {
		assert.Equal(t, http.StatusOK, codes[i], "request %d: %s", i, bodies[i])
		assert.Equal(t, "handled", bodies[i])
	}
}

// notifyNoT is notify for goroutines: it reports failures as a status of
// 0 with the error's text.
func notifyNoT(srv *httptest.Server, body string) (int, bool, string) {
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/notify", strings.NewReader(body))
	if err != nil {
		return 0, false, err.Error()
	}
	r.Header.Set(userHeader, "alice")
	resp, err := srv.Client().Do(r)
	if err != nil {
		return 0, false, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err.Error()
	}
	return resp.StatusCode, resp.Header.Get(idemhttp.ReplayedHeader) == "true", string(b)
}

// A handled callback whose 2xx response is over the stored-size cap (or
// streamed) is still answered 2xx on every retry: its status and headers
// are kept without the body, and the handler does not run again. A
// provider must never be told to retry a callback that was handled.
func TestCallbackKeepsA2xxTooLargeToStore(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(w http.ResponseWriter)
	}{
		{"too large", func(w http.ResponseWriter) { _, _ = w.Write([]byte(strings.Repeat("x", 4096))) }},
		{"streamed", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("part"))
			w.(http.Flusher).Flush()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Type", "text/plain")
				w.Header().Set("X-Handled", "yes")
				w.WriteHeader(http.StatusAccepted)
				c.write(w)
			})
			mw := mustMiddleware(t)(idemhttp.Idempotency(testkit.NewEngine(t), byUser, idemhttp.Callback(0),
				idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("txn")), idemhttp.WithMaxStoredResponse(1024), idemhttp.WithReplayHeaders("X-Handled")))
			srv := httptest.NewServer(mw(h))
			t.Cleanup(srv.Close)
			code, replayed, _ := notify(t, srv, "", `{"txn":"T9"}`, nil)
			require.Equal(t, http.StatusAccepted, code)
			assert.False(t, replayed)
			for range 2 {
				code, replayed, body := notify(t, srv, "", `{"txn":"T9"}`, nil)
				assert.Equal(t, http.StatusAccepted, code, "a retry of a handled callback gets its 2xx, body %q", body)
				assert.True(t, replayed)
				assert.Empty(t, body, "the body that was not kept is not replayed")
			}
			assert.EqualValues(t, 1, runs.Load(), "the handler ran once")
		})
	}
}
