package idemgrpc_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// lossy is a server interceptor placed in front of the idempotency
// interceptor. It records the key of every attempt and, for the first lose
// attempts, runs the call and then drops its response, answering
// Unavailable as a broken connection or a proxy would.
type lossy struct {
	lose int

	mu        sync.Mutex
	keys      []string
	lost      []any
	onAttempt func() // called, if set, as each attempt arrives
}

func (l *lossy) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	l.mu.Lock()
	l.keys = append(l.keys, strings.Join(md.Get("idempotency-key"), ","))
	n := len(l.keys)
	onAttempt := l.onAttempt
	l.mu.Unlock()
	if onAttempt != nil {
		onAttempt()
	}
	resp, err := handler(ctx, req)
	if n <= l.lose {
		l.mu.Lock()
		l.lost = append(l.lost, resp)
		l.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "response lost on the way back")
	}
	return resp, err
}

func (l *lossy) attempts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// serveLossy serves srv behind lossy and the idempotency interceptor.
func serveLossy(t *testing.T, e *idemkit.Engine, srv *orders, l *lossy, dopts ...grpc.DialOption) *grpc.ClientConn {
	return serve(t, srv, []grpc.ServerOption{grpc.ChainUnaryInterceptor(
		l.intercept,
		newServer(t, e, idemgrpc.WithMethods(methodCreate), idemgrpc.WithPrincipal(userPrincipal)).UnaryServerInterceptor(),
	)}, dopts...)
}

func assertRetriedWithOneKey(t *testing.T, srv *orders, l *lossy, r reply) {
	t.Helper()
	require.NoError(t, r.err)
	assert.True(t, r.replayed, "the retry got the stored response")
	assert.EqualValues(t, 1, srv.runs.Load(), "handler runs")
	keys := l.attempts()
	require.Len(t, keys, 2)
	assert.Len(t, keys[0], 43, "a fresh key from keying.NewToken")
	assert.Equal(t, keys[0], keys[1], "both attempts carry the same key")
	require.Len(t, l.lost, 1)
	assert.True(t, proto.Equal(l.lost[0].(proto.Message), r.out), "the replay is the lost response")
}

func TestClientRetriesKeepTheKeyAfterALostResponse(t *testing.T) {
	srv := &orders{}
	l := &lossy{lose: 1}
	conn := serveLossy(t, testkit.NewEngine(t), srv, l, clientInterceptor(t,
		idemgrpc.WithMethods(methodCreate), idemgrpc.WithRetries(3), idemgrpc.WithBackoff(time.Millisecond, 5*time.Millisecond)))
	r := create(callCtx(t, "alice", ""), conn, mustStruct(t, map[string]any{"item": "book"}))
	assertRetriedWithOneKey(t, srv, l, r)
}

const retryPolicy = `{"methodConfig": [{
	"name": [{"service": "test.Orders"}],
	"retryPolicy": {
		"maxAttempts": 3,
		"initialBackoff": "0.001s",
		"maxBackoff": "0.01s",
		"backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE", "ABORTED"]
	}
}]}`

func TestGRPCRetryPolicyKeepsTheKeyAfterALostResponse(t *testing.T) {
	srv := &orders{}
	l := &lossy{lose: 1}
	conn := serveLossy(t, testkit.NewEngine(t), srv, l,
		grpc.WithDefaultServiceConfig(retryPolicy),
		clientInterceptor(t, idemgrpc.WithMethods(methodCreate)))
	r := create(callCtx(t, "alice", ""), conn, mustStruct(t, map[string]any{"item": "book"}))
	assertRetriedWithOneKey(t, srv, l, r)
}

func TestClientHonoursRetryInfo(t *testing.T) {
	testInFlightRetry(t, 20*time.Millisecond, clientInterceptor(t,
		idemgrpc.WithMethods(methodCreate), idemgrpc.WithRetries(100)))
}

// grpc-go's retry policy retries an Aborted repeat (after the
// grpc-retry-pushback-ms delay the server sets; it allows at most 5
// attempts, hence the longer hint) and the retry gets the replay.
func TestGRPCRetryPolicyRetriesInFlightRepeats(t *testing.T) {
	testInFlightRetry(t, 200*time.Millisecond, grpc.WithDefaultServiceConfig(strings.Replace(retryPolicy, `"maxAttempts": 3`, `"maxAttempts": 5`, 1)))
}

// testInFlightRetry sends a repeat while the first call with its key runs;
// the first call is released once the repeat was answered Aborted, and the
// repeat, retried by the client after the hint, gets the replay.
func testInFlightRetry(t *testing.T, hint time.Duration, dopt grpc.DialOption) {
	release := make(chan struct{})
	var once sync.Once
	var inProgress atomic.Int32
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventInProgress {
			inProgress.Add(1)
			once.Do(func() { close(release) })
		}
	})
	ms := testkit.NewMem(t)
	e, err := idemkit.New(ms, idemkit.WithObserver(obs), idemkit.WithRetryHint(hint))
	require.NoError(t, err)

	srv := &orders{}
	entered := make(chan struct{})
	srv.unary = func(ctx context.Context, m string, in *structpb.Struct) (*structpb.Struct, error) {
		close(entered)
		<-release // held until the repeat has been told to retry
		return srv.echo(ctx, m, in)
	}
	conn := serveLossy(t, e, srv, &lossy{}, dopt)

	firstDone := make(chan reply, 1)
	go func() { firstDone <- create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil)) }()
	<-entered
	second := create(callCtx(t, "alice", "k"), conn, mustStruct(t, nil))
	first := <-firstDone

	require.NoError(t, first.err)
	require.NoError(t, second.err, "the repeat retried after the RetryInfo delay")
	assert.True(t, second.replayed)
	assert.True(t, proto.Equal(first.out, second.out))
	assert.GreaterOrEqual(t, inProgress.Load(), int32(1))
	assert.EqualValues(t, 1, srv.runs.Load())
}

// serveCounting serves a handler that always fails with err and counts
// attempts; the client retries up to 5 times.
func serveCounting(t *testing.T, fail error, copts ...idemgrpc.Option) (*grpc.ClientConn, *lossy) {
	srv := &orders{}
	srv.unary = func(context.Context, string, *structpb.Struct) (*structpb.Struct, error) { return nil, fail }
	l := &lossy{}
	copts = append([]idemgrpc.Option{idemgrpc.WithMethods(methodCreate), idemgrpc.WithRetries(5), idemgrpc.WithBackoff(time.Millisecond, 2*time.Millisecond)}, copts...)
	conn := serve(t, srv, []grpc.ServerOption{grpc.UnaryInterceptor(l.intercept)},
		clientInterceptor(t, copts...))
	return conn, l
}

func TestClientRetriesOnlyRetryableCodes(t *testing.T) {
	cases := map[string]struct {
		fail     error
		attempts int
	}{
		"unavailable":            {status.Error(codes.Unavailable, "down"), 6},
		"aborted without hint":   {status.Error(codes.Aborted, "conflict"), 1},
		"invalid argument":       {status.Error(codes.InvalidArgument, "bad"), 1},
		"internal":               {status.Error(codes.Internal, "bug"), 1},
		"deadline from upstream": {status.Error(codes.DeadlineExceeded, "slow"), 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			conn, l := serveCounting(t, tc.fail)
			r := create(callCtx(t, "alice", ""), conn, mustStruct(t, nil))
			assert.Equal(t, status.Code(tc.fail), code(r.err))
			keys := l.attempts()
			require.Len(t, keys, tc.attempts)
			for _, k := range keys {
				assert.Equal(t, keys[0], k)
			}
		})
	}
}

func TestClientDoesNotWaitPastTheDeadline(t *testing.T) {
	conn, l := serveCounting(t, status.Error(codes.Unavailable, "down"), idemgrpc.WithBackoff(time.Hour, time.Hour))
	ctx, cancel := context.WithTimeout(callCtx(t, "alice", ""), time.Minute)
	defer cancel()
	r := create(ctx, conn, mustStruct(t, nil))
	assert.Equal(t, codes.Unavailable, code(r.err), "the last error, not a wait")
	assert.Len(t, l.attempts(), 1)
}

func TestClientWaitEndsWithTheContext(t *testing.T) {
	conn, l := serveCounting(t, status.Error(codes.Unavailable, "down"), idemgrpc.WithBackoff(time.Hour, time.Hour))
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), userHeader, "alice"))
	defer cancel()
	l.mu.Lock()
	l.onAttempt = cancel // the client is then waiting out its hour of back-off
	l.mu.Unlock()
	r := create(ctx, conn, mustStruct(t, nil))
	assert.Equal(t, codes.Canceled, code(r.err), r.err)
	assert.Len(t, l.attempts(), 1)
}

func TestClientKeyHandling(t *testing.T) {
	srv := &orders{}
	l := &lossy{}
	conn := serve(t, srv, []grpc.ServerOption{grpc.UnaryInterceptor(l.intercept)},
		clientInterceptor(t, idemgrpc.WithMethods(methodCreate)))
	require.NoError(t, create(callCtx(t, "alice", ""), conn, mustStruct(t, nil)).err)
	require.NoError(t, create(callCtx(t, "alice", ""), conn, mustStruct(t, nil)).err)
	require.NoError(t, create(callCtx(t, "alice", "mine"), conn, mustStruct(t, nil)).err)
	require.NoError(t, conn.Invoke(callCtx(t, "alice", ""), methodGet, mustStruct(t, nil), new(structpb.Struct)))
	keys := l.attempts()
	require.Len(t, keys, 4)
	assert.Len(t, keys[0], 43)
	assert.NotEqual(t, keys[0], keys[1], "each call gets its own key")
	assert.Equal(t, "mine", keys[2], "a key set by the caller is kept")
	assert.Empty(t, keys[3], "unselected methods get no key")
}

// WithCallKey chooses the key of one call: the call carries it, a resend
// with it gets the replay, and it protects a method that is not selected.
func TestWithCallKeyChoosesTheKeyOfOneCall(t *testing.T) {
	srv := &orders{}
	l := &lossy{}
	conn := serve(t, srv, []grpc.ServerOption{grpc.ChainUnaryInterceptor(l.intercept,
		newServer(t, testkit.NewEngine(t), idemgrpc.WithMethods(methodCreate), idemgrpc.WithPrincipal(userPrincipal)).UnaryServerInterceptor())},
		clientInterceptor(t, idemgrpc.WithMethods(methodCreate)))
	var replies []reply
	for range 2 {
		var hdr metadata.MD
		out := new(structpb.Struct)
		err := conn.Invoke(callCtx(t, "alice", ""), methodCreate, mustStruct(t, nil), out, grpc.Header(&hdr), idemgrpc.WithCallKey("outbox-17"))
		replies = append(replies, reply{out: out, err: err, replayed: len(hdr.Get(idemgrpc.ReplayedHeader)) == 1})
	}
	require.NoError(t, conn.Invoke(callCtx(t, "alice", ""), methodGet, mustStruct(t, nil), new(structpb.Struct), idemgrpc.WithCallKey("get-1")))
	assert.Equal(t, []string{"outbox-17", "outbox-17", "get-1"}, l.attempts())
	require.NoError(t, replies[0].err)
	require.NoError(t, replies[1].err)
	assert.True(t, replies[1].replayed)
	assert.True(t, proto.Equal(replies[0].out, replies[1].out))
	assert.EqualValues(t, 2, srv.runs.Load(), "Create once, Get once")
}

// WithoutIdempotency sends one call of a selected method as it is: no key,
// no retries of the interceptor's own.
func TestWithoutIdempotencySkipsOneCall(t *testing.T) {
	conn, l := serveCounting(t, status.Error(codes.Unavailable, "down"))
	r := create(callCtx(t, "alice", ""), conn, mustStruct(t, nil))
	assert.Equal(t, codes.Unavailable, code(r.err))
	require.Len(t, l.attempts(), 6, "selected calls get a key and retries")
	err := conn.Invoke(callCtx(t, "alice", ""), methodCreate, mustStruct(t, nil), new(structpb.Struct), idemgrpc.WithoutIdempotency())
	assert.Equal(t, codes.Unavailable, code(err))
	keys := l.attempts()
	require.Len(t, keys, 7, "one attempt only")
	assert.Empty(t, keys[6], "and no key")
}

// A CallOption the call cannot honour fails the call before it is sent,
// without echoing the key.
func TestInvalidCallOptionsFailBeforeSending(t *testing.T) {
	srv := &orders{}
	l := &lossy{}
	conn := serve(t, srv, []grpc.ServerOption{grpc.UnaryInterceptor(l.intercept)}, clientInterceptor(t, idemgrpc.WithMethods(methodCreate)))
	cases := map[string]struct {
		ctx    context.Context
		method string
		opts   []grpc.CallOption
	}{
		"empty key":          {callCtx(t, "alice", ""), methodCreate, []grpc.CallOption{idemgrpc.WithCallKey("")}},
		"long key":           {callCtx(t, "alice", ""), methodCreate, []grpc.CallOption{idemgrpc.WithCallKey(strings.Repeat("k", idemgrpc.MaxKeyLen+1))}},
		"non-printable key":  {callCtx(t, "alice", ""), methodCreate, []grpc.CallOption{idemgrpc.WithCallKey("sec\x01ret")}},
		"two keys":           {callCtx(t, "alice", ""), methodCreate, []grpc.CallOption{idemgrpc.WithCallKey("a"), idemgrpc.WithCallKey("b")}},
		"key and skip":       {callCtx(t, "alice", ""), methodCreate, []grpc.CallOption{idemgrpc.WithCallKey("a"), idemgrpc.WithoutIdempotency()}},
		"key in metadata":    {callCtx(t, "alice", "mine"), methodCreate, []grpc.CallOption{idemgrpc.WithCallKey("secret")}},
		"unselected and bad": {callCtx(t, "alice", ""), methodGet, []grpc.CallOption{idemgrpc.WithCallKey("")}},
	}
	for name, tc := range cases {
		err := conn.Invoke(tc.ctx, tc.method, mustStruct(t, nil), new(structpb.Struct), tc.opts...)
		assert.Equal(t, codes.InvalidArgument, code(err), "%s: %v", name, err)
		assert.NotContains(t, status.Convert(err).Message(), "secret", name)
	}
	assert.Empty(t, l.attempts(), "nothing was sent")
	assert.Zero(t, srv.runs.Load())
}

// The same key given twice is one key, and other call options reach the
// invoker untouched.
func TestCallOptionsMixWithGRPCOptions(t *testing.T) {
	srv := &orders{}
	l := &lossy{}
	conn := serve(t, srv, []grpc.ServerOption{grpc.UnaryInterceptor(l.intercept)}, clientInterceptor(t, idemgrpc.WithMethods(methodCreate)))
	var hdr metadata.MD
	err := conn.Invoke(callCtx(t, "alice", ""), methodCreate, mustStruct(t, nil), new(structpb.Struct),
		idemgrpc.WithCallKey("a"), grpc.Header(&hdr), idemgrpc.WithCallKey("a"), grpc.WaitForReady(true))
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, l.attempts())
	assert.NotNil(t, hdr, "grpc.Header was honoured")
}
