package idemconnect_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// A grpc-go client behind idemgrpc's client interceptor, calling a
// Connect server behind idemconnect: the key it sends is the one the
// server reads, a repeat is replayed with the header grpc-go reads, and a
// repeat in progress is Aborted with the RetryInfo and the pushback
// trailer idemgrpc's own server gives.
func TestGRPCGoClientMeetsTheSameContract(t *testing.T) {
	srv := &orders{}
	entered, release := make(chan struct{}), make(chan struct{})
	srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		if req.Msg.GetFields()["hold"] != nil {
			close(entered)
			<-release
		}
		return srv.echo(ctx, req)
	}
	base, _ := serveIdem(t, testkit.NewEngine(t), srv, idemconnect.WithEngineOptions(idemkit.WithRetryHint(300*time.Millisecond)))
	u, err := url.Parse(base)
	require.NoError(t, err)
	keys, err := idemgrpc.NewClient(idemgrpc.WithMethods(procCreate))
	require.NoError(t, err)
	conn, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(keys.UnaryClientInterceptor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	invoke := func(key string, in *structpb.Struct) (*structpb.Struct, metadata.MD, metadata.MD, error) {
		var hdr, trl metadata.MD
		out := new(structpb.Struct)
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-user", "alice")
		err := conn.Invoke(ctx, procCreate, in, out, idemgrpc.WithCallKey(key), grpc.Header(&hdr), grpc.Trailer(&trl))
		return out, hdr, trl, err
	}

	in := mustStruct(t, map[string]any{"item": "pen"})
	first, hdr, _, err := invoke("g1", in)
	require.NoError(t, err)
	assert.Empty(t, hdr.Get(idemgrpc.ReplayedHeader))
	again, hdr, trl, err := invoke("g1", in)
	require.NoError(t, err)
	assert.Equal(t, []string{"true"}, hdr.Get(idemgrpc.ReplayedHeader))
	assert.True(t, proto.Equal(first, again))
	assert.Equal(t, []string{"sum-number_value:1"}, trl.Get("x-checksum"), "the trailer is replayed")
	assert.EqualValues(t, 1, srv.runs.Load())

	held := mustStruct(t, map[string]any{"hold": true})
	done := make(chan error, 1)
	go func() { _, _, _, err := invoke("g2", held); done <- err }()
	<-entered
	_, _, trl, err = invoke("g2", held)
	require.Equal(t, codes.Aborted, status.Code(err), err)
	var info *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			info = ri
		}
	}
	require.NotNil(t, info, "RetryInfo detail")
	assert.Equal(t, 300*time.Millisecond, info.GetRetryDelay().AsDuration())
	assert.Equal(t, []string{"300"}, trl.Get("grpc-retry-pushback-ms"))
	close(release)
	require.NoError(t, <-done)

	_, _, _, err = invoke("g1", mustStruct(t, map[string]any{"item": "other"}))
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "the mismatch code idemgrpc gives")
}
