package idemconnect_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// The test service, built without protoc: Create and Get are unary over
// structpb.Struct, Watch is server-streaming.
const (
	procCreate = "/test.Orders/Create"
	procGet    = "/test.Orders/Get"
	procWatch  = "/test.Orders/Watch"
	userHeader = "X-User"
)

// protocols are the three protocols a Connect server speaks, as client
// options.
var protocols = []struct {
	name string
	opt  []connect.ClientOption
}{
	{"connect", nil},
	{"connect+json", []connect.ClientOption{connect.WithProtoJSON()}},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"grpcweb", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// orders implements the service with replaceable functions.
type orders struct {
	runs  atomic.Int32
	unary func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error)
}

// echo answers with the request's fields plus a "run" number, so a replay
// can be told from a new execution, and sets a header and a trailer.
func (o *orders) echo(_ context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
	n := o.runs.Add(1)
	out, err := structpb.NewStruct(map[string]any{"run": float64(n)})
	if err != nil {
		return nil, err
	}
	for k, v := range req.Msg.GetFields() {
		out.Fields[k] = v
	}
	resp := connect.NewResponse(out)
	resp.Header().Set("X-Order-Run", "run-"+out.Fields["run"].String())
	resp.Header().Add("X-Tag", "a")
	resp.Header().Add("X-Tag", "b")
	resp.Trailer().Set("X-Checksum", "sum-"+out.Fields["run"].String())
	return resp, nil
}

func (o *orders) create(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
	if o.unary != nil {
		return o.unary(ctx, req)
	}
	return o.echo(ctx, req)
}

func (o *orders) watch(_ context.Context, req *connect.Request[structpb.Struct], ss *connect.ServerStream[structpb.Struct]) error {
	o.runs.Add(1)
	return ss.Send(req.Msg)
}

// serve starts the service behind idem on a loopback port, speaking
// HTTP/1.1 and HTTP/2 without TLS (h2c) so that gRPC works, and returns
// its URL and an HTTP client that speaks HTTP/2 to it. Both stop when the
// test ends.
func serve(tb testing.TB, srv *orders, idem connect.Interceptor) (string, *http.Client) {
	tb.Helper()
	opts := []connect.HandlerOption{}
	if idem != nil {
		opts = append(opts, connect.WithInterceptors(idem))
	}
	mux := http.NewServeMux()
	mux.Handle(procCreate, connect.NewUnaryHandler(procCreate, srv.create, opts...))
	mux.Handle(procGet, connect.NewUnaryHandler(procGet, srv.create, opts...))
	mux.Handle(procWatch, connect.NewServerStreamHandler(procWatch, srv.watch, opts...))
	return serveMux(tb, mux)
}

// serveMux serves h on a loopback port, speaking HTTP/1.1 and HTTP/2
// without TLS (h2c), and returns its URL and an HTTP/2 client.
func serveMux(tb testing.TB, h http.Handler) (string, *http.Client) {
	tb.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	tb.Cleanup(ts.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tb.Cleanup(tr.CloseIdleConnections)
	return ts.URL, &http.Client{Transport: tr}
}

// serveIdem serves srv behind a Server with the default test options
// (Create and Watch selected, principal from X-User) and opts.
func serveIdem(tb testing.TB, e *idemkit.Engine, srv *orders, opts ...idemconnect.Option) (string, *http.Client) {
	tb.Helper()
	opts = append([]idemconnect.Option{
		idemconnect.WithProcedure[structpb.Struct](procCreate),
		idemconnect.WithProcedure[structpb.Struct](procWatch),
		idemconnect.WithPrincipal(userPrincipal),
	}, opts...)
	s, err := idemconnect.NewServer(e, opts...)
	require.NoError(tb, err)
	return serve(tb, srv, s)
}

// userPrincipal names the caller from the X-User request header, as an
// authentication interceptor would.
func userPrincipal(_ context.Context, h http.Header) (string, error) {
	if u := h.Values(userHeader); len(u) == 1 && u[0] != "" {
		return u[0], nil
	}
	return "", errors.New("no user")
}

// newClient returns a client of procedure at base.
func newClient(base string, hc *http.Client, procedure string, opts ...connect.ClientOption) *connect.Client[structpb.Struct, structpb.Struct] {
	return connect.NewClient[structpb.Struct, structpb.Struct](hc, base+procedure, opts...)
}

// request returns a request carrying the user and, unless empty, the key.
func request(tb testing.TB, user, key string, fields map[string]any) *connect.Request[structpb.Struct] {
	tb.Helper()
	req := connect.NewRequest(mustStruct(tb, fields))
	req.Header().Set(userHeader, user)
	if key != "" {
		req.Header().Set("Idempotency-Key", key)
	}
	return req
}

func mustStruct(tb testing.TB, fields map[string]any) *structpb.Struct {
	tb.Helper()
	s, err := structpb.NewStruct(fields)
	require.NoError(tb, err)
	return s
}

func callCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// reply is the outcome of one call.
type reply struct {
	resp     *connect.Response[structpb.Struct]
	err      error
	replayed bool
}

func call(ctx context.Context, c *connect.Client[structpb.Struct, structpb.Struct], req *connect.Request[structpb.Struct]) reply {
	resp, err := c.CallUnary(ctx, req)
	r := reply{resp: resp, err: err}
	switch {
	case resp != nil:
		r.replayed = resp.Header().Get(idemconnect.ReplayedHeader) == "true"
	case err != nil:
		var ce *connect.Error
		r.replayed = errors.As(err, &ce) && ce.Meta().Get(idemconnect.ReplayedHeader) == "true"
	}
	return r
}

// claimCounter is a store that counts the claims (SetNX calls) made on it
// and closes met when they reach want, so that a handler can hold the
// first call in flight until the other calls have met its claim, however
// slow the machine, instead of sleeping. It offers only store.Store's
// methods, so the engine claims with SetNX.
type claimCounter struct {
	store.Store
	want   int32
	claims atomic.Int32
	met    chan struct{}
}

func newClaimCounter(tb testing.TB, want int) *claimCounter {
	return &claimCounter{Store: testkit.NewMem(tb), want: int32(want), met: make(chan struct{})}
}

func (c *claimCounter) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	if c.claims.Add(1) == c.want {
		close(c.met)
	}
	return c.Store.SetNX(ctx, key, value, ttl)
}

// awaitClaims blocks until c has seen its want claims, or ctx ends.
func (c *claimCounter) awaitClaims(ctx context.Context) error {
	select {
	case <-c.met:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
