package idemgrpc_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
)

// A method name that is not a full gRPC method name ("/pkg.Service/Method")
// can never match a call, so the method it was meant to protect would run
// unprotected. The interceptors must refuse such a configuration instead:
// since which methods are protected is unknown, every call fails.
func TestReviewMalformedMethodNameFailsClosed(t *testing.T) {
	for name, opt := range map[string]idemgrpc.Option{
		"no leading slash": idemgrpc.WithMethods("test.Orders/Create"),
		"short name":       idemgrpc.WithMethods("Create"),
		"dotted":           idemgrpc.WithMethods("/test.Orders.Create"),
		"empty method":     idemgrpc.WithMethods("/test.Orders/"),
		"nil selector":     idemgrpc.WithSelector(nil),
	} {
		t.Run(name, func(t *testing.T) {
			srv := &orders{}
			e := newEngine(t)
			conn := serve(t, srv, []grpc.ServerOption{
				grpc.UnaryInterceptor(idemgrpc.UnaryServerInterceptor(e, opt, idemgrpc.WithPrincipal(userPrincipal))),
				grpc.StreamInterceptor(idemgrpc.StreamServerInterceptor(e, opt, idemgrpc.WithPrincipal(userPrincipal))),
			})
			for range 2 {
				r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
				assert.Equal(t, codes.Internal, code(r.err), r.err)
			}
			_, err := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
			assert.Equal(t, codes.Internal, code(err), err)
			assert.Zero(t, srv.runs.Load(), "nothing runs unprotected")
		})
	}
}

// The client interceptor refuses a malformed method name the same way:
// otherwise the call it was meant to cover goes out without a key.
func TestReviewClientMalformedMethodNameFails(t *testing.T) {
	srv := &orders{}
	l := &lossy{}
	conn := serve(t, srv, []grpc.ServerOption{grpc.UnaryInterceptor(l.intercept)},
		grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(idemgrpc.WithMethods("test.Orders/Create"))))
	r := create(callCtx(t, "alice", ""), conn, mustStruct(t, nil))
	assert.Equal(t, codes.Internal, code(r.err), r.err)
	assert.Empty(t, l.attempts(), "nothing was sent")
}

// An invalid engine option given with WithCallOptions is a server
// configuration error: it must fail with Internal (naming the option), not
// with InvalidArgument, which tells the client its request is wrong.
func TestReviewInvalidCallOptionIsAConfigurationError(t *testing.T) {
	for name, opt := range map[string]idemkit.Option{
		"negative lease":     idemkit.WithLease(-time.Second),
		"per-call namespace": idemkit.WithNamespace("other"),
	} {
		t.Run(name, func(t *testing.T) {
			srv := &orders{}
			conn := serveIdem(t, newEngine(t), srv, idemgrpc.WithCallOptions(opt))
			r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
			assert.Equal(t, codes.Internal, code(r.err), r.err)
			assert.Contains(t, status.Convert(r.err).Message(), "call option")
			_, err := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
			assert.Equal(t, codes.Internal, code(err), err)
			assert.Zero(t, srv.runs.Load())
		})
	}
}

// A stored response whose type the resolver no longer knows (a deploy
// removed or renamed it) fails cleanly with Internal, and the failure is
// not marked as a replay: the client did not get the stored outcome.
func TestReviewUnknownStoredTypeIsInternalWithoutReplayHeader(t *testing.T) {
	srv := &orders{}
	e := newEngine(t)
	conn := serveIdem(t, e, srv, idemgrpc.WithTypeResolver(new(protoregistry.Types)))
	first := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	require.NoError(t, first.err)
	for range 2 {
		r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
		assert.Equal(t, codes.Internal, code(r.err), r.err)
		assert.Contains(t, status.Convert(r.err).Message(), "google.protobuf.Struct")
		assert.False(t, r.replayed, "an undecodable record is not a replay")
	}
	assert.EqualValues(t, 1, srv.runs.Load(), "the handler never runs twice")
}

// The replay header appears exactly once on a replay (success or final
// status) and never on a first execution.
func TestReviewReplayHeaderExactlyOnce(t *testing.T) {
	srv := &orders{}
	var fail atomic.Bool
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		if fail.Load() {
			srv.runs.Add(1)
			return nil, status.Error(codes.NotFound, "gone")
		}
		return srv.echo(ctx, m, in)
	}
	conn := serveIdem(t, newEngine(t), srv)
	for _, f := range []bool{false, true} {
		fail.Store(f)
		key := map[bool]string{false: "ok", true: "final"}[f]
		for i := range 3 {
			var hdr metadata.MD
			err := conn.Invoke(callCtx(t, "alice", key), methodCreate, mustStruct(t, nil), new(structpb.Struct), grpc.Header(&hdr))
			if f {
				assert.Equal(t, codes.NotFound, code(err))
			} else {
				require.NoError(t, err)
			}
			if i == 0 {
				assert.Empty(t, hdr.Get(idemgrpc.ReplayedHeader), "%s attempt %d", key, i)
			} else {
				assert.Equal(t, []string{"true"}, hdr.Get(idemgrpc.ReplayedHeader), "%s attempt %d", key, i)
			}
		}
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}
