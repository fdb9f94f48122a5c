package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
)

// fenceServer is a loopback server that records the fence header of every
// request it gets ("" when absent).
type fenceServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newFenceServer(t *testing.T, header string) *fenceServer {
	s := &fenceServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get(header))
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

// last returns the fence header of the last request.
func (s *fenceServer) last(t *testing.T) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.seen, "the server got a request")
	return s.seen[len(s.seen)-1]
}

// send sends a request through c with ctx, failing t on an error.
func send(t *testing.T, ctx context.Context, c *http.Client, method, url string) {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, method, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(r)
	require.NoError(t, err)
	_ = resp.Body.Close()
}

// Inside Do's fn, every request through a Transport with FenceHeader
// carries the claim's fencing token; outside a claim, none.
func TestTransportForwardsTheFence(t *testing.T) {
	srv := newFenceServer(t, idemhttp.FenceHeader)
	client := &http.Client{Transport: &idemhttp.Transport{FenceHeader: idemhttp.FenceHeader, MaxRetries: idemhttp.NoRetries}}
	e := testkit.NewEngine(t)

	for _, method := range []string{http.MethodPost, http.MethodGet} {
		var want uint64
		_, err := e.Do(t.Context(), "order-"+method, "fp", func(ctx context.Context) ([]byte, error) {
			fence, ok := idemkit.FenceFromContext(ctx)
			require.True(t, ok)
			want = fence
			send(t, ctx, client, method, srv.URL)
			return nil, nil
		})
		require.NoError(t, err)
		assert.Equal(t, strconv.FormatUint(want, 10), srv.last(t), "%s inside a claim", method)
	}

	send(t, t.Context(), client, http.MethodPost, srv.URL)
	assert.Empty(t, srv.last(t), "outside a claim")

	plain := &http.Client{Transport: &idemhttp.Transport{MaxRetries: idemhttp.NoRetries}}
	_, err := e.Do(t.Context(), "order-plain", "fp", func(ctx context.Context) ([]byte, error) {
		send(t, ctx, plain, http.MethodPost, srv.URL)
		return nil, nil
	})
	require.NoError(t, err)
	assert.Empty(t, srv.last(t), "without FenceHeader (the default)")
}

// The caller's request is not modified, a header the caller set is sent as
// it is, and every retry carries the same token.
func TestTransportFenceOnClonesAndRetries(t *testing.T) {
	var got []string
	tr := &idemhttp.Transport{FenceHeader: "X-Fence", MinBackoff: time.Millisecond, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get("X-Fence"))
		if len(got) < 3 {
			return nil, errors.New("connection reset")
		}
		return status(204, nil, "")()
	})}
	e := testkit.NewEngine(t)
	_, err := e.Do(t.Context(), "k", "fp", func(ctx context.Context) ([]byte, error) {
		fence, _ := idemkit.FenceFromContext(ctx)
		want := strconv.FormatUint(fence, 10)
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/", nil)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, []string{want, want, want}, got, "every attempt carries the token")
		assert.Empty(t, r.Header.Get("X-Fence"), "the caller's request is not modified")

		got = nil
		r = httptest.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/", nil)
		r.Header.Set("X-Fence", "7")
		resp, err = tr.RoundTrip(r)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, []string{"7", "7", "7"}, got, "a header the caller set is kept")
		return nil, nil
	})
	require.NoError(t, err)
}

// A caller that takes a key over after the first caller's lease ended
// sends a larger token than the first caller sent.
func TestTransportFenceGrowsOnTakeover(t *testing.T) {
	srv := newFenceServer(t, idemhttp.FenceHeader)
	client := &http.Client{Transport: &idemhttp.Transport{FenceHeader: idemhttp.FenceHeader, MaxRetries: idemhttp.NoRetries}}
	e := testkit.NewEngine(t)
	opts := []idemkit.Option{idemkit.WithLease(50 * time.Millisecond), idemkit.WithoutHeartbeat()}

	var first, second uint64
	_, err := e.Do(t.Context(), "k", "fp", func(ctx context.Context) ([]byte, error) {
		send(t, ctx, client, http.MethodPost, srv.URL)
		var perr error
		first, perr = strconv.ParseUint(srv.last(t), 10, 64)
		require.NoError(t, perr)
		// The first caller stalls past its lease: another takes the key over.
		testkit.WaitFor(t, "a takeover", func() bool {
			_, err := e.Do(context.Background(), "k", "fp", func(ctx context.Context) ([]byte, error) {
				send(t, ctx, client, http.MethodPost, srv.URL)
				second, perr = strconv.ParseUint(srv.last(t), 10, 64)
				return nil, perr
			}, opts...)
			require.True(t, err == nil || errors.Is(err, idemkit.ErrInProgress), "%v", err)
			return err == nil
		})
		// The stalled caller's late request carries the old token, which
		// a fencing downstream refuses.
		send(t, ctx, client, http.MethodPost, srv.URL)
		assert.Equal(t, strconv.FormatUint(first, 10), srv.last(t))
		return nil, nil
	}, opts...)
	require.ErrorIs(t, err, idemkit.ErrLeaseLost)
	assert.Greater(t, second, first)
}

func TestFenceFromRequest(t *testing.T) {
	const h = "X-Fence"
	for name, tc := range map[string]struct {
		values  []string
		fence   uint64
		present bool
		bad     bool
	}{
		"absent":     {},
		"decimal":    {values: []string{"123456789"}, fence: 123456789, present: true},
		"max":        {values: []string{"18446744073709551615"}, fence: 1<<64 - 1, present: true},
		"empty":      {values: []string{""}, present: true, bad: true},
		"negative":   {values: []string{"-1"}, present: true, bad: true},
		"plus":       {values: []string{"+1"}, present: true, bad: true},
		"hex":        {values: []string{"0x10"}, present: true, bad: true},
		"spaced":     {values: []string{"1 2"}, present: true, bad: true},
		"overflow":   {values: []string{"18446744073709551616"}, present: true, bad: true},
		"underscore": {values: []string{"1_000"}, present: true, bad: true},
		"repeated":   {values: []string{"1", "2"}, present: true, bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://example.test/", nil)
			for _, v := range tc.values {
				r.Header.Add(h, v)
			}
			fence, present, err := idemhttp.FenceFromRequest(r, h)
			assert.Equal(t, tc.present, present)
			if tc.bad {
				require.ErrorIs(t, err, idemhttp.ErrMalformedFence)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.fence, fence)
		})
	}
	_, _, err := idemhttp.FenceFromRequest(httptest.NewRequest(http.MethodGet, "/", nil), "bad header")
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}
