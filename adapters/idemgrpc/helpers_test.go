package idemgrpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// The test service, built without protoc: /test.Orders/Create and Get are
// unary over structpb.Struct, Watch is server-streaming.
const (
	methodCreate = "/test.Orders/Create"
	methodGet    = "/test.Orders/Get"
	methodWatch  = "/test.Orders/Watch"
	userHeader   = "x-user"
)

type ordersService interface{}

// orders implements the service with replaceable functions.
type orders struct {
	runs  atomic.Int32
	unary func(ctx context.Context, method string, in *structpb.Struct) (*structpb.Struct, error)
	watch func(in *structpb.Struct, ss grpc.ServerStream) error
}

// echo answers with the request's fields plus a "run" number, so a replay
// can be told from a new execution.
func (o *orders) echo(_ context.Context, _ string, in *structpb.Struct) (*structpb.Struct, error) {
	n := o.runs.Add(1)
	out, err := structpb.NewStruct(map[string]any{"run": float64(n)})
	if err != nil {
		return nil, err
	}
	for k, v := range in.GetFields() {
		out.Fields[k] = v
	}
	return out, nil
}

func unaryHandler(method string) func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(structpb.Struct)
		if err := dec(in); err != nil {
			return nil, err
		}
		o := srv.(*orders)
		h := func(ctx context.Context, req any) (any, error) {
			if o.unary == nil {
				return o.echo(ctx, method, req.(*structpb.Struct))
			}
			return o.unary(ctx, method, req.(*structpb.Struct))
		}
		if ic == nil {
			return h(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}
}

func watchHandler(srv any, ss grpc.ServerStream) error {
	in := new(structpb.Struct)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	o := srv.(*orders)
	o.runs.Add(1)
	if o.watch != nil {
		return o.watch(in, ss)
	}
	return ss.SendMsg(in)
}

var ordersDesc = grpc.ServiceDesc{
	ServiceName: "test.Orders",
	HandlerType: (*ordersService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Create", Handler: unaryHandler(methodCreate)},
		{MethodName: "Get", Handler: unaryHandler(methodGet)},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Watch", Handler: watchHandler, ServerStreams: true},
	},
}

var watchDesc = &ordersDesc.Streams[0]

// serve starts a gRPC server for srv on a loopback listener and returns a
// client connection to it. Both stop when the test ends.
func serve(tb testing.TB, srv *orders, sopts []grpc.ServerOption, dopts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	s := grpc.NewServer(sopts...)
	s.RegisterService(&ordersDesc, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	dopts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dopts...)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), dopts...)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
		<-done
	})
	return conn
}

// userPrincipal names the caller from the x-user request metadata, as an
// auth interceptor would.
func userPrincipal(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if u := md.Get(userHeader); len(u) == 1 && u[0] != "" {
		return u[0], nil
	}
	return "", errors.New("no user")
}

// callCtx returns a context carrying the user and, unless empty, the key.
func callCtx(tb testing.TB, user, key string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	kv := []string{userHeader, user}
	if key != "" {
		kv = append(kv, "idempotency-key", key)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func mustStruct(tb testing.TB, fields map[string]any) *structpb.Struct {
	tb.Helper()
	s, err := structpb.NewStruct(fields)
	require.NoError(tb, err)
	return s
}

// reply is the outcome of one call.
type reply struct {
	out      *structpb.Struct
	err      error
	replayed bool
}

func create(ctx context.Context, conn *grpc.ClientConn, in *structpb.Struct) reply {
	var hdr metadata.MD
	out := new(structpb.Struct)
	err := conn.Invoke(ctx, methodCreate, in, out, grpc.Header(&hdr))
	r := reply{err: err, replayed: strings.Join(hdr.Get("idempotent-replayed"), ",") == "true"}
	if err == nil {
		r.out = out
	}
	return r
}

func code(err error) codes.Code { return status.Code(err) }

var errTransient = status.Error(codes.Unavailable, "downstream unavailable")

// newServer builds a Server over e, failing the test on a configuration
// error.
func newServer(tb testing.TB, e *idemkit.Engine, opts ...idemgrpc.Option) *idemgrpc.Server {
	tb.Helper()
	s, err := idemgrpc.NewServer(e, opts...)
	require.NoError(tb, err)
	return s
}

// unaryOnly returns server options installing s's unary interceptor.
func unaryOnly(s *idemgrpc.Server) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.UnaryInterceptor(s.UnaryServerInterceptor())}
}

// clientInterceptor returns a dial option installing a Client built from
// opts, failing the test on a configuration error.
func clientInterceptor(tb testing.TB, opts ...idemgrpc.Option) grpc.DialOption {
	tb.Helper()
	c, err := idemgrpc.NewClient(opts...)
	require.NoError(tb, err)
	return grpc.WithUnaryInterceptor(c.UnaryClientInterceptor())
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

// newClaimCounter returns a claimCounter over a fresh memory store whose
// met channel closes at the want-th claim.
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
