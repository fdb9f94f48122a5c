package idemgrpc_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// fenceSeen is what a fenced server saw of a call's metadata.
type fenceSeen struct {
	fence string // the fence entry, "" when absent
	key   string // the idempotency key entry, "" when absent
}

// fenceRecorder serves the test service on loopback and records the fence
// and key metadata of every unary call and stream.
type fenceRecorder struct {
	mu   sync.Mutex
	seen []fenceSeen
}

func (f *fenceRecorder) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, fenceSeen{
		fence: strings.Join(md.Get(idemgrpc.FenceMetadataKey), ","),
		key:   strings.Join(md.Get(idemgrpc.DefaultMetadataKey), ","),
	})
}

func (f *fenceRecorder) last(t *testing.T) fenceSeen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.seen, "the server got a call")
	return f.seen[len(f.seen)-1]
}

// serveFenced starts the recording server and returns a connection whose
// interceptors come from a Client built with copts.
func serveFenced(t *testing.T, copts ...idemgrpc.Option) (*grpc.ClientConn, *fenceRecorder) {
	f := &fenceRecorder{}
	srv := &orders{}
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		f.record(ctx)
		return srv.echo(ctx, m, in)
	}
	srv.watch = func(in *structpb.Struct, ss grpc.ServerStream) error {
		f.record(ss.Context())
		return ss.SendMsg(in)
	}
	c, err := idemgrpc.NewClient(copts...)
	require.NoError(t, err)
	conn := serve(t, srv, nil, grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()), grpc.WithStreamInterceptor(c.StreamClientInterceptor()))
	return conn, f
}

// Inside Do's fn, every unary call and stream through a Client with
// WithFenceMetadata carries the claim's fencing token, selected or not;
// outside a claim, or with WithoutIdempotency, none.
func TestClientForwardsTheFence(t *testing.T) {
	conn, f := serveFenced(t, idemgrpc.WithMethods(methodCreate), idemgrpc.WithFenceMetadata(idemgrpc.FenceMetadataKey))
	e := testkit.NewEngine(t)
	calls := map[string]func(ctx context.Context, opts ...grpc.CallOption) error{
		"selected unary": func(ctx context.Context, opts ...grpc.CallOption) error {
			return conn.Invoke(ctx, methodCreate, mustStruct(t, nil), new(structpb.Struct), opts...)
		},
		"unselected unary": func(ctx context.Context, opts ...grpc.CallOption) error {
			return conn.Invoke(ctx, methodGet, mustStruct(t, nil), new(structpb.Struct), opts...)
		},
		"stream": func(ctx context.Context, opts ...grpc.CallOption) error {
			stream, err := conn.NewStream(ctx, watchDesc, methodWatch, opts...)
			if err != nil {
				return err
			}
			if err := stream.SendMsg(mustStruct(t, nil)); err != nil {
				return err
			}
			return stream.RecvMsg(new(structpb.Struct))
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			_, err := e.Do(t.Context(), "order-"+name, "fp", func(ctx context.Context) ([]byte, error) {
				fence, ok := idemkit.FenceFromContext(ctx)
				require.True(t, ok)
				require.NoError(t, call(ctx))
				assert.Equal(t, strconv.FormatUint(fence, 10), f.last(t).fence, "inside a claim")
				require.NoError(t, call(ctx, idemgrpc.WithoutIdempotency()))
				assert.Empty(t, f.last(t).fence, "WithoutIdempotency sends the call as it is")
				return nil, nil
			})
			require.NoError(t, err)
			require.NoError(t, call(t.Context()))
			assert.Empty(t, f.last(t).fence, "outside a claim")
		})
	}
}

// An entry the caller put in the outgoing metadata is sent as it is, and
// without WithFenceMetadata (the default) no token is sent.
func TestClientFenceKeepsTheCallersEntry(t *testing.T) {
	conn, f := serveFenced(t, idemgrpc.WithMethods(methodCreate), idemgrpc.WithFenceMetadata(idemgrpc.FenceMetadataKey))
	plain, g := serveFenced(t, idemgrpc.WithMethods(methodCreate))
	e := testkit.NewEngine(t)
	_, err := e.Do(t.Context(), "k", "fp", func(ctx context.Context) ([]byte, error) {
		out := metadata.AppendToOutgoingContext(ctx, idemgrpc.FenceMetadataKey, "7")
		require.NoError(t, conn.Invoke(out, methodCreate, mustStruct(t, nil), new(structpb.Struct)))
		assert.Equal(t, "7", f.last(t).fence)
		require.NoError(t, plain.Invoke(ctx, methodCreate, mustStruct(t, nil), new(structpb.Struct)))
		assert.Empty(t, g.last(t).fence, "without WithFenceMetadata")
		return nil, nil
	})
	require.NoError(t, err)
}

// The stream interceptor gives a selected stream a key, as the unary one
// does a call: a fresh one, the caller's, or WithCallKey's; an unselected
// stream gets none.
func TestStreamClientInterceptorAddsAKey(t *testing.T) {
	conn, f := serveFenced(t, idemgrpc.WithMethods(methodWatch))
	other, g := serveFenced(t, idemgrpc.WithMethods(methodCreate))
	open := func(ctx context.Context, conn *grpc.ClientConn, f *fenceRecorder, opts ...grpc.CallOption) fenceSeen {
		t.Helper()
		stream, err := conn.NewStream(ctx, watchDesc, methodWatch, opts...)
		require.NoError(t, err)
		require.NoError(t, stream.SendMsg(mustStruct(t, nil)))
		require.NoError(t, stream.RecvMsg(new(structpb.Struct)))
		return f.last(t)
	}
	assert.Len(t, open(t.Context(), conn, f).key, 43, "a fresh key from keying.NewToken")
	assert.Equal(t, "held", open(callCtx(t, "alice", "held"), conn, f).key)
	assert.Equal(t, "given", open(t.Context(), conn, f, idemgrpc.WithCallKey("given")).key)
	assert.Empty(t, open(t.Context(), conn, f, idemgrpc.WithoutIdempotency()).key)
	assert.Empty(t, open(t.Context(), other, g).key, "an unselected stream")
	assert.Equal(t, "given", open(t.Context(), other, g, idemgrpc.WithCallKey("given")).key, "WithCallKey on an unselected stream")
	_, err := conn.NewStream(callCtx(t, "alice", "held"), watchDesc, methodWatch, idemgrpc.WithCallKey("given"))
	assert.Equal(t, codes.InvalidArgument, code(err), "WithCallKey with a key in the metadata")
}

// A caller that takes a key over after the first caller's lease ended
// sends a larger token than the first caller sent.
func TestClientFenceGrowsOnTakeover(t *testing.T) {
	conn, f := serveFenced(t, idemgrpc.WithMethods(methodCreate), idemgrpc.WithFenceMetadata(idemgrpc.FenceMetadataKey))
	e := testkit.NewEngine(t)
	opts := []idemkit.Option{idemkit.WithLease(50 * time.Millisecond), idemkit.WithoutHeartbeat()}
	invoke := func(ctx context.Context) uint64 {
		require.NoError(t, conn.Invoke(ctx, methodCreate, mustStruct(t, nil), new(structpb.Struct)))
		fence, err := strconv.ParseUint(f.last(t).fence, 10, 64)
		require.NoError(t, err)
		return fence
	}
	var first, second uint64
	_, err := e.Do(t.Context(), "k", "fp", func(ctx context.Context) ([]byte, error) {
		first = invoke(ctx)
		// The first caller stalls past its lease: another takes the key over.
		testkit.WaitFor(t, "a takeover", func() bool {
			_, err := e.Do(context.Background(), "k", "fp", func(ctx context.Context) ([]byte, error) {
				second = invoke(ctx)
				return nil, nil
			}, opts...)
			require.True(t, err == nil || errors.Is(err, idemkit.ErrInProgress), "%v", err)
			return err == nil
		})
		return nil, nil
	}, opts...)
	require.ErrorIs(t, err, idemkit.ErrLeaseLost)
	assert.Greater(t, second, first)
}

func TestFenceFromIncomingContext(t *testing.T) {
	const key = "x-fence"
	for name, tc := range map[string]struct {
		values  []string
		fence   uint64
		present bool
		bad     bool
	}{
		"absent":   {},
		"decimal":  {values: []string{"123456789"}, fence: 123456789, present: true},
		"max":      {values: []string{"18446744073709551615"}, fence: 1<<64 - 1, present: true},
		"empty":    {values: []string{""}, present: true, bad: true},
		"negative": {values: []string{"-1"}, present: true, bad: true},
		"plus":     {values: []string{"+1"}, present: true, bad: true},
		"hex":      {values: []string{"0x10"}, present: true, bad: true},
		"overflow": {values: []string{"18446744073709551616"}, present: true, bad: true},
		"repeated": {values: []string{"1", "2"}, present: true, bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			md := metadata.MD{}
			for _, v := range tc.values {
				md.Append(key, v)
			}
			ctx := metadata.NewIncomingContext(t.Context(), md)
			fence, present, err := idemgrpc.FenceFromIncomingContext(ctx, "X-Fence")
			assert.Equal(t, tc.present, present)
			if tc.bad {
				require.ErrorIs(t, err, idemgrpc.ErrMalformedFence)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.fence, fence)
		})
	}
	fence, present, err := idemgrpc.FenceFromIncomingContext(t.Context(), key)
	assert.Zero(t, fence)
	assert.False(t, present, "no metadata at all")
	assert.NoError(t, err)
	for _, bad := range []string{"", "fence-bin", "grpc-fence", "a b"} {
		_, _, err = idemgrpc.FenceFromIncomingContext(t.Context(), bad)
		require.ErrorIs(t, err, idemkit.ErrInvalid, "%q", bad)
	}
}
