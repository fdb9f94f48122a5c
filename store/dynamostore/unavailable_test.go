package dynamostore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamostore"
)

// faultProxy forwards requests to dynalite, or answers them with a fault
// while one is set.
type faultProxy struct {
	mu     sync.Mutex
	status int
	body   string
}

func (f *faultProxy) set(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.body = status, body
}

// startFaultProxy starts a proxy in front of dynalite and returns it and
// its URL.
func startFaultProxy(t *testing.T) (*faultProxy, string) {
	target, err := url.Parse(endpoint)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	f := &faultProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		status, body := f.status, f.body
		f.mu.Unlock()
		if status == 0 {
			rp.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// TestUnavailable answers every operation with throttling and 5xx errors,
// as DynamoDB does, through a proxy in front of dynalite: each returns an
// error wrapping store.ErrUnavailable after one request, the SDK's
// retries being off.
func TestUnavailable(t *testing.T) {
	needDynalite(t)
	proxy, proxyURL := startFaultProxy(t)
	client, c := newClient(proxyURL)
	table := newTable(t, client)
	ctx := context.Background()
	s, err := dynamostore.New(ctx, client, table)
	require.NoError(t, err)
	set, _, err := s.SetNX(ctx, "held", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)

	const prefix = `{"__type":"com.amazonaws.dynamodb.v20120810#`
	faults := map[string]struct {
		status int
		body   string
	}{
		"ProvisionedThroughputExceeded": {400, prefix + `ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`},
		"RequestLimitExceeded":          {400, prefix + `RequestLimitExceeded","message":"Throughput exceeds the current throughput limit for your account."}`},
		"ThrottlingException":           {400, `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`},
		"InternalServerError":           {500, prefix + `InternalServerError","message":"Internal server error"}`},
		"503 without a body":            {503, ``},
		"502 from a load balancer":      {502, `<html>Bad Gateway</html>`},
	}
	ops := map[string]func() error{
		"SetNX": func() error { _, _, err := s.SetNX(ctx, "held", []byte("x"), time.Minute); return err },
		"SetNXValue": func() error {
			_, _, err := s.SetNXValue(ctx, "held", []byte("x"), time.Minute)
			return err
		},
		"Get": func() error { _, err := s.Get(ctx, "held"); return err },
		"CompareAndSwap": func() error {
			_, err := s.CompareAndSwap(ctx, "held", []byte("v"), []byte("w"), time.Minute)
			return err
		},
		"CompareAndDelete": func() error { _, err := s.CompareAndDelete(ctx, "held", []byte("v")); return err },
		"Consume":          func() error { _, err := s.Consume(ctx, "held"); return err },
		"Scan":             func() error { return s.Scan(ctx, "", func(string, store.Entry) bool { return true }) },
		"Ping":             func() error { return s.Ping(ctx) },
	}
	for name, f := range faults {
		t.Run(name, func(t *testing.T) {
			proxy.set(f.status, f.body)
			defer proxy.set(0, "")
			for op, call := range ops {
				c.reset()
				err := call()
				require.True(t, errors.Is(err, store.ErrUnavailable), "%s: %v", op, err)
				require.Equal(t, 1, c.total(), "%s: requests sent (the SDK must not retry)", op)
			}
		})
	}
	// Nothing changed while DynamoDB failed.
	e, err := s.Get(ctx, "held")
	require.NoError(t, err)
	require.Equal(t, "v", string(e.Value))
}

// TestUnreachable checks that a DynamoDB that cannot be reached and a
// passed deadline give errors wrapping store.ErrUnavailable.
func TestUnreachable(t *testing.T) {
	s, _ := newStore(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	dead := srv.URL
	srv.Close()
	client, _ := newClient(dead)
	_, err := dynamostore.New(context.Background(), client, s.Table())
	require.True(t, errors.Is(err, store.ErrUnavailable), "%v", err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, _, err = s.SetNX(ctx, "k", []byte("v"), time.Minute)
	require.True(t, errors.Is(err, store.ErrUnavailable), "%v", err)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// TestThrottledEngine: through the engine, a throttled DynamoDB gets the
// failure policy: FailClosed refuses the work with ErrUnavailable,
// FailOpen runs it unprotected.
func TestThrottledEngine(t *testing.T) {
	needDynalite(t)
	proxy, proxyURL := startFaultProxy(t)
	client, _ := newClient(proxyURL)
	table := newTable(t, client)
	ctx := context.Background()
	s, err := dynamostore.New(ctx, client, table)
	require.NoError(t, err)
	proxy.set(400, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}`)

	runs := 0
	work := func(context.Context) ([]byte, error) { runs++; return []byte("ok"), nil }
	closed, err := idemkit.New(s)
	require.NoError(t, err)
	_, err = closed.Do(ctx, "order-42", "fp", work)
	require.True(t, errors.Is(err, idemkit.ErrUnavailable), "%v", err)
	require.Equal(t, 0, runs, "FailClosed must not run the work")

	open, err := idemkit.New(s, idemkit.WithFailureMode(idemkit.FailOpen))
	require.NoError(t, err)
	res, err := open.Do(ctx, "order-42", "fp", work)
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Value))
	require.Equal(t, 1, runs, "FailOpen runs the work unprotected")
}
