package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store/storetest"
)

// serveIdem serves srv behind the unary and stream interceptors with the
// default test options (Create and Watch selected, principal from x-user).
func serveIdem(t *testing.T, e *idemkit.Engine, srv *orders, opts ...idemgrpc.Option) *grpc.ClientConn {
	opts = append([]idemgrpc.Option{
		idemgrpc.WithMethods(methodCreate, methodWatch),
		idemgrpc.WithPrincipal(userPrincipal),
	}, opts...)
	s := newServer(t, e, opts...)
	return serve(t, srv, []grpc.ServerOption{
		grpc.UnaryInterceptor(s.UnaryServerInterceptor()),
		grpc.StreamInterceptor(s.StreamServerInterceptor()),
	})
}

func retryDelayOf(t *testing.T, err error) time.Duration {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("no RetryInfo in %v", err)
	return 0
}

func TestConcurrentCallsWithOneKeyRunOnce(t *testing.T) {
	const n = 50
	// The first call stays in flight until every call has tried to claim
	// the key: the other n-1 all find it in progress.
	claims := newClaimCounter(t, n)
	srv := &orders{}
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		if err := claims.awaitClaims(ctx); err != nil {
			return nil, err
		}
		return srv.echo(ctx, m, in)
	}
	conn := serveIdem(t, testkit.NewEngineOn(t, claims), srv)
	in := mustStruct(t, map[string]any{"item": "book", "qty": 2})

	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { replies[i] = create(callCtx(t, "alice", "k-50"), conn, in) })
	}
	wg.Wait()

	require.EqualValues(t, 1, srv.runs.Load(), "handler runs")
	var ok, fresh int
	var first *structpb.Struct
	for _, r := range replies {
		if r.err != nil {
			require.Equal(t, codes.Aborted, code(r.err), r.err)
			assert.Positive(t, retryDelayOf(t, r.err))
			continue
		}
		ok++
		if !r.replayed {
			fresh++
		}
		if first == nil {
			first = r.out
		}
		assert.True(t, proto.Equal(first, r.out), "every success carries the same response")
	}
	assert.Equal(t, 1, fresh, "exactly one response is not a replay")
	assert.GreaterOrEqual(t, ok, 1)
	after := create(callCtx(t, "alice", "k-50"), conn, in)
	require.NoError(t, after.err)
	assert.True(t, after.replayed)
	assert.True(t, proto.Equal(first, after.out))
}

func TestReplayEqualsOriginalAndCarriesHeader(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	in := mustStruct(t, map[string]any{"item": "pen", "tags": []any{"a", "b"}, "nested": map[string]any{"x": 1.5}})

	first := create(callCtx(t, "alice", "k1"), conn, in)
	require.NoError(t, first.err)
	assert.False(t, first.replayed)
	second := create(callCtx(t, "alice", "k1"), conn, in)
	require.NoError(t, second.err)
	assert.True(t, second.replayed)
	assert.True(t, proto.Equal(first.out, second.out), "replay %v, original %v", second.out, first.out)
	assert.EqualValues(t, 1, srv.runs.Load())

	other := create(callCtx(t, "alice", "k2"), conn, in)
	require.NoError(t, other.err)
	assert.False(t, other.replayed)
	assert.EqualValues(t, 2, srv.runs.Load(), "another key runs again")
}

func TestPayloadMismatch(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	require.NoError(t, create(callCtx(t, "alice", "k"), conn, mustStruct(t, map[string]any{"qty": 1})).err)
	r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, map[string]any{"qty": 2}))
	assert.Equal(t, codes.FailedPrecondition, code(r.err), r.err)
	assert.EqualValues(t, 1, srv.runs.Load())
}

func TestMissingKey(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	r := create(callCtx(t, "alice", ""), conn, mustStruct(t, nil))
	assert.Equal(t, codes.InvalidArgument, code(r.err), r.err)
	assert.Contains(t, status.Convert(r.err).Message(), "idempotency-key")
	assert.Zero(t, srv.runs.Load())
}

func TestOptionalKeyPassesThrough(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv, idemgrpc.WithOptionalKey())
	for range 2 {
		r := create(callCtx(t, "alice", ""), conn, mustStruct(t, nil))
		require.NoError(t, r.err)
		assert.False(t, r.replayed)
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}

// Malformed keys are checked by calling the interceptor directly: grpc-go
// itself refuses to send non-printable metadata values.
func TestMalformedKeys(t *testing.T) {
	intercept := newServer(t, testkit.NewEngine(t), idemgrpc.WithMethods(methodCreate),
		idemgrpc.WithPrincipal(func(context.Context) (string, error) { return "p", nil })).UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: methodCreate}
	ran := 0
	handler := func(context.Context, any) (any, error) { ran++; return mustStruct(t, nil), nil }
	for name, md := range map[string]metadata.MD{
		"empty":         metadata.Pairs("idempotency-key", ""),
		"too long":      metadata.Pairs("idempotency-key", strings.Repeat("k", idemgrpc.MaxKeyLen+1)),
		"non-printable": metadata.Pairs("idempotency-key", "ab\x01c"),
		"non-ascii":     metadata.Pairs("idempotency-key", "clé"),
		"twice":         metadata.Pairs("idempotency-key", "a", "idempotency-key", "b"),
	} {
		_, err := intercept(metadata.NewIncomingContext(context.Background(), md), mustStruct(t, nil), info, handler)
		assert.Equal(t, codes.InvalidArgument, code(err), "%s: %v", name, err)
	}
	assert.Zero(t, ran)

	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("idempotency-key", strings.Repeat("k", idemgrpc.MaxKeyLen)))
	_, err := intercept(ctx, mustStruct(t, nil), info, handler)
	require.NoError(t, err, "a key of MaxKeyLen bytes is accepted")
	assert.Equal(t, 1, ran)
}

func TestInFlightRepeatIsAbortedWithRetryInfo(t *testing.T) {
	srv := &orders{}
	entered, release := make(chan struct{}), make(chan struct{})
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		close(entered)
		<-release
		return srv.echo(ctx, m, in)
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv, idemgrpc.WithEngineOptions(idemkit.WithRetryHint(250*time.Millisecond)))
	in := mustStruct(t, map[string]any{"a": 1})

	firstDone := make(chan reply, 1)
	go func() { firstDone <- create(callCtx(t, "alice", "k"), conn, in) }()
	<-entered

	var trailer metadata.MD
	err := conn.Invoke(callCtx(t, "alice", "k"), methodCreate, in, new(structpb.Struct), grpc.Trailer(&trailer))
	require.Equal(t, codes.Aborted, code(err), err)
	d := retryDelayOf(t, err)
	assert.Positive(t, d)
	assert.LessOrEqual(t, d, 250*time.Millisecond)
	assert.Equal(t, []string{"250"}, trailer.Get("grpc-retry-pushback-ms"))

	close(release)
	first := <-firstDone
	require.NoError(t, first.err)
	again := create(callCtx(t, "alice", "k"), conn, in)
	require.NoError(t, again.err)
	assert.True(t, again.replayed)
	assert.True(t, proto.Equal(first.out, again.out))
	assert.EqualValues(t, 1, srv.runs.Load())
}

func TestStoreDownFailClosed(t *testing.T) {
	e, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	require.NoError(t, err)
	srv := &orders{}
	conn := serveIdem(t, e, srv)
	r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	assert.Equal(t, codes.Unavailable, code(r.err), r.err)
	assert.NotContains(t, r.err.Error(), storetest.ErrDown.Error(), "store details stay on the server")
	assert.Zero(t, srv.runs.Load())

	stream, err := conn.NewStream(callCtx(t, "alice", "k"), watchDesc, methodWatch)
	require.NoError(t, err)
	require.NoError(t, stream.SendMsg(mustStruct(t, nil)))
	require.NoError(t, stream.CloseSend())
	err = stream.RecvMsg(new(structpb.Struct))
	assert.Equal(t, codes.Unavailable, code(err), err)
	assert.Zero(t, srv.runs.Load())
}

func TestStoreDownFailOpen(t *testing.T) {
	e, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil))
	require.NoError(t, err)
	srv := &orders{}
	conn := serveIdem(t, e, srv, idemgrpc.WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)))
	for range 2 {
		r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, map[string]any{"a": "b"}))
		require.NoError(t, r.err)
		assert.False(t, r.replayed)
		assert.Equal(t, "b", r.out.GetFields()["a"].GetStringValue())
	}
	assert.EqualValues(t, 2, srv.runs.Load(), "unguarded: every call runs")
}

func TestFinalErrorReplayedAsSameStatus(t *testing.T) {
	srv := &orders{}
	srv.unary = func(context.Context, string, *structpb.Struct) (*structpb.Struct, error) {
		srv.runs.Add(1)
		st, err := status.New(codes.NotFound, "no such customer").WithDetails(&errdetails.ErrorInfo{Reason: "CUSTOMER_UNKNOWN", Domain: "test"})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	first := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	require.Equal(t, codes.NotFound, code(first.err))
	assert.False(t, first.replayed)
	second := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	assert.True(t, second.replayed)
	assert.True(t, proto.Equal(status.Convert(first.err).Proto(), status.Convert(second.err).Proto()),
		"replayed %v, original %v", second.err, first.err)
	require.Len(t, status.Convert(second.err).Details(), 1)
	assert.ErrorIs(t, second.err, first.err, "the replay is the same status to errors.Is")
	assert.EqualValues(t, 1, srv.runs.Load())
}

func TestTransientErrorRunsAgain(t *testing.T) {
	srv := &orders{}
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		if srv.runs.Load() == 0 {
			srv.runs.Add(1)
			return nil, status.Error(codes.Internal, "database hiccup")
		}
		return srv.echo(ctx, m, in)
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	first := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	require.Equal(t, codes.Internal, code(first.err))
	second := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	require.NoError(t, second.err)
	assert.False(t, second.replayed)
	assert.EqualValues(t, 2, srv.runs.Load())
}

func TestWithFinalCodesReplacesTheSet(t *testing.T) {
	srv := &orders{}
	var fail atomic.Uint32
	fail.Store(uint32(codes.Internal))
	srv.unary = func(context.Context, string, *structpb.Struct) (*structpb.Struct, error) {
		srv.runs.Add(1)
		return nil, status.Error(codes.Code(fail.Load()), "boom")
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv, idemgrpc.WithFinalCodes(codes.Internal))
	for range 2 {
		assert.Equal(t, codes.Internal, code(create(callCtx(t, "alice", "internal"), conn, mustStruct(t, nil)).err))
	}
	assert.EqualValues(t, 1, srv.runs.Load(), "Internal is final now")
	fail.Store(uint32(codes.NotFound))
	for range 2 {
		assert.Equal(t, codes.NotFound, code(create(callCtx(t, "alice", "notfound"), conn, mustStruct(t, nil)).err))
	}
	assert.EqualValues(t, 3, srv.runs.Load(), "NotFound is no longer final")
}

func TestPrincipalsAreIsolated(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	alice := create(callCtx(t, "alice", "shared"), conn, mustStruct(t, map[string]any{"who": "alice"}))
	bob := create(callCtx(t, "bob", "shared"), conn, mustStruct(t, map[string]any{"who": "bob"}))
	require.NoError(t, alice.err)
	require.NoError(t, bob.err, "another principal's key is not a mismatch")
	assert.False(t, bob.replayed)
	assert.Equal(t, "bob", bob.out.GetFields()["who"].GetStringValue())
	again := create(callCtx(t, "alice", "shared"), conn, mustStruct(t, map[string]any{"who": "alice"}))
	require.NoError(t, again.err)
	assert.True(t, again.replayed)
	assert.True(t, proto.Equal(alice.out, again.out))
	assert.EqualValues(t, 2, srv.runs.Load())
}

func TestPrincipalErrorIsUnauthenticated(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	r := create(callCtx(t, "", "k"), conn, mustStruct(t, nil))
	assert.Equal(t, codes.Unauthenticated, code(r.err), r.err)
	assert.Zero(t, srv.runs.Load())
}

func TestUnselectedMethodsPassThrough(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	for range 2 {
		var hdr metadata.MD
		err := conn.Invoke(callCtx(t, "alice", "k"), methodGet, mustStruct(t, nil), new(structpb.Struct), grpc.Header(&hdr))
		require.NoError(t, err)
		assert.Empty(t, hdr.Get("idempotent-replayed"))
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}

func TestSelectorAndCustomMetadataKey(t *testing.T) {
	srv := &orders{}
	conn := serve(t, srv, unaryOnly(newServer(t, testkit.NewEngine(t),
		idemgrpc.WithPrincipal(userPrincipal),
		idemgrpc.WithMetadataKey("X-Request-Id"),
		idemgrpc.WithSelector(func(_ context.Context, m string) bool { return strings.HasSuffix(m, "/Get") }))))
	ctx := metadata.AppendToOutgoingContext(callCtx(t, "alice", ""), "x-request-id", "r1")
	for range 2 {
		require.NoError(t, conn.Invoke(ctx, methodGet, mustStruct(t, nil), new(structpb.Struct)))
	}
	assert.EqualValues(t, 1, srv.runs.Load(), "Get is selected by the selector")
	require.NoError(t, conn.Invoke(callCtx(t, "alice", ""), methodCreate, mustStruct(t, nil), new(structpb.Struct)))
	assert.EqualValues(t, 2, srv.runs.Load(), "Create is not selected")
}

func TestWaitingRepeatsGetTheReplay(t *testing.T) {
	replies := make([]reply, 10)
	// The first call stays in flight until the repeats have claimed as
	// often as there are calls: they wait for it, then get its replay.
	claims := newClaimCounter(t, len(replies))
	srv := &orders{}
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		if err := claims.awaitClaims(ctx); err != nil {
			return nil, err
		}
		return srv.echo(ctx, m, in)
	}
	conn := serveIdem(t, testkit.NewEngineOn(t, claims), srv, idemgrpc.WithEngineOptions(idemkit.WithWait(time.Millisecond)))
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() { replies[i] = create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil)) })
	}
	wg.Wait()
	for _, r := range replies {
		require.NoError(t, r.err)
		assert.True(t, proto.Equal(replies[0].out, r.out))
	}
	assert.EqualValues(t, 1, srv.runs.Load())
}

// A stored response whose type the resolver no longer knows (a deploy
// removed or renamed it) fails cleanly with Internal, and the failure is
// not marked as a replay: the client did not get the stored outcome.
func TestUnknownStoredTypeIsInternalWithoutReplayHeader(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv, idemgrpc.WithTypeResolver(new(protoregistry.Types)))
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
func TestReplayHeaderExactlyOnce(t *testing.T) {
	srv := &orders{}
	var fail atomic.Bool
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		if fail.Load() {
			srv.runs.Add(1)
			return nil, status.Error(codes.NotFound, "gone")
		}
		return srv.echo(ctx, m, in)
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
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

// A principal function that returns a status of its own (PermissionDenied
// for a suspended account) has it sent as is; any other error becomes
// Unauthenticated with a fixed text.
func TestPrincipalStatusIsKept(t *testing.T) {
	srv := &orders{}
	conn := serve(t, srv, unaryOnly(newServer(t, testkit.NewEngine(t), idemgrpc.WithMethods(methodCreate),
		idemgrpc.WithPrincipal(func(context.Context) (string, error) {
			return "", status.Error(codes.PermissionDenied, "account suspended")
		}))))
	r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	assert.Equal(t, codes.PermissionDenied, code(r.err))
	assert.Equal(t, "account suspended", status.Convert(r.err).Message())
	assert.Zero(t, srv.runs.Load())
}

// A principal function's error that wraps a status (fmt.Errorf("...: %w",
// status.Error(...))) has the wrapped status sent, with its own message:
// the wrapping text, which may quote the caller's credential, is not sent.
func TestWrappedPrincipalStatusSendsOnlyTheStatus(t *testing.T) {
	srv := &orders{}
	s := newServer(t, testkit.NewEngine(t), idemgrpc.WithMethods(methodCreate, methodWatch),
		idemgrpc.WithPrincipal(func(context.Context) (string, error) {
			return "", fmt.Errorf("no session for bearer token %s: %w", secretToken, status.Error(codes.PermissionDenied, "account suspended"))
		}))
	conn := serve(t, srv, []grpc.ServerOption{
		grpc.UnaryInterceptor(s.UnaryServerInterceptor()),
		grpc.StreamInterceptor(s.StreamServerInterceptor()),
	})
	_, serr := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
	for _, err := range []error{create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil)).err, serr} {
		assert.Equal(t, codes.PermissionDenied, code(err))
		assert.Equal(t, "account suspended", status.Convert(err).Message())
	}
	assert.Zero(t, srv.runs.Load())
}

// A final status whose message is not valid UTF-8 (a handler quoting raw
// request bytes) is stored and replayed like any other, with the message
// the client got the first time (gRPC sends each invalid byte as U+FFFD):
// the handler does not run again.
func TestFinalStatusWithInvalidUTF8IsReplayed(t *testing.T) {
	srv := &orders{}
	srv.unary = func(context.Context, string, *structpb.Struct) (*structpb.Struct, error) {
		srv.runs.Add(1)
		return nil, status.Error(codes.NotFound, "no customer \xff\xfe1")
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	first := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	require.Equal(t, codes.NotFound, code(first.err))
	second := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	assert.Equal(t, codes.NotFound, code(second.err))
	assert.True(t, second.replayed)
	assert.Equal(t, status.Convert(first.err).Message(), status.Convert(second.err).Message())
	assert.EqualValues(t, 1, srv.runs.Load(), "the handler runs once")
}

// garbageCodec stores every error as bytes no status decodes from.
type garbageCodec struct{}

func (garbageCodec) EncodeError(error) ([]byte, bool) { return []byte{0x7f, 0xff}, true }
func (garbageCodec) DecodeError([]byte) error         { return errors.New("unused") }

// A stored final status that cannot be decoded fails with Internal and,
// like a stored response that cannot be rebuilt, is not marked replayed:
// the client did not get the stored outcome.
func TestCorruptStoredStatusIsInternalWithoutReplayHeader(t *testing.T) {
	e := testkit.NewEngine(t)
	fp := new(keying.Fingerprinter).SumRaw("", methodCreate, nil, nil) // the empty request's
	_, err := e.Do(context.Background(), keying.Key("grpc", methodCreate, "k"), fp,
		func(context.Context) ([]byte, error) { return nil, errors.New("final") },
		idemkit.WithScope("alice"), idemkit.WithErrorCodec(garbageCodec{}))
	require.Error(t, err)
	srv := &orders{}
	conn := serveIdem(t, e, srv)
	r := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	assert.Equal(t, codes.Internal, code(r.err), r.err)
	assert.False(t, r.replayed, "an undecodable record is not a replay")
	assert.Zero(t, srv.runs.Load())
}
