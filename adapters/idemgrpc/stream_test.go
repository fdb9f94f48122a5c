package idemgrpc_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// watch opens a Watch stream, sends in and reads until the stream ends. It
// returns the messages received and the final error (nil for a clean end).
func watch(ctx context.Context, conn *grpc.ClientConn, method string, in *structpb.Struct) (int, error) {
	stream, err := conn.NewStream(ctx, watchDesc, method)
	if err != nil {
		return 0, err
	}
	if err := stream.SendMsg(in); err != nil {
		return 0, err
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	n := 0
	for {
		if err := stream.RecvMsg(new(structpb.Struct)); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

func TestConcurrentDuplicateStreamsAdmitOne(t *testing.T) {
	srv := &orders{}
	var admitted atomic.Int32
	srv.watch = func(in *structpb.Struct, ss grpc.ServerStream) error {
		admitted.Add(1)
		for range 3 {
			if err := ss.SendMsg(in); err != nil {
				return err
			}
		}
		return nil
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv)

	const n = 20
	got := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = watch(callCtx(t, "alice", "s1"), conn, methodWatch, mustStruct(t, nil)) })
	}
	wg.Wait()

	assert.EqualValues(t, 1, admitted.Load(), "handler runs")
	wins := 0
	for i, err := range errs {
		if err == nil {
			wins++
			assert.Equal(t, 3, got[i])
			continue
		}
		require.Equal(t, codes.AlreadyExists, code(err), err)
		assert.Positive(t, retryDelayOf(t, err))
		assert.Zero(t, got[i])
	}
	assert.Equal(t, 1, wins)
}

func TestStreamKeysAndSelection(t *testing.T) {
	srv := &orders{}
	conn := serveIdem(t, testkit.NewEngine(t), srv)

	_, err := watch(callCtx(t, "alice", ""), conn, methodWatch, mustStruct(t, nil))
	assert.Equal(t, codes.InvalidArgument, code(err), "missing key: %v", err)
	_, err = watch(callCtx(t, "", "k"), conn, methodWatch, mustStruct(t, nil))
	assert.Equal(t, codes.Unauthenticated, code(err), err)
	assert.Zero(t, srv.runs.Load())

	for _, who := range []struct{ user, key string }{{"alice", "a"}, {"alice", "b"}, {"bob", "a"}} {
		n, err := watch(callCtx(t, who.user, who.key), conn, methodWatch, mustStruct(t, nil))
		require.NoError(t, err, "%+v", who)
		assert.Equal(t, 1, n)
	}
	assert.EqualValues(t, 3, srv.runs.Load(), "distinct keys and principals are admitted")
}

func TestUnselectedStreamPassesThrough(t *testing.T) {
	srv := &orders{}
	e := testkit.NewEngine(t)
	s := newServer(t, e, idemgrpc.WithMethods(methodCreate), idemgrpc.WithPrincipal(userPrincipal))
	conn := serve(t, srv, []grpc.ServerOption{grpc.StreamInterceptor(s.StreamServerInterceptor())})
	for range 2 {
		_, err := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
		require.NoError(t, err)
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}

func TestStreamReleaseOnError(t *testing.T) {
	srv := &orders{}
	var calls atomic.Int32
	srv.watch = func(in *structpb.Struct, ss grpc.ServerStream) error {
		if calls.Add(1) == 1 {
			return errTransient
		}
		return ss.SendMsg(in)
	}
	conn := serveIdem(t, testkit.NewEngine(t), srv, idemgrpc.WithEngineOptions(idemkit.WithRelease(idemkit.ReleaseOnError)))
	_, err := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
	assert.Equal(t, codes.Unavailable, code(err), err)
	n, err := watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
	require.NoError(t, err, "a failed stream freed its key")
	assert.Equal(t, 1, n)
	_, err = watch(callCtx(t, "alice", "k"), conn, methodWatch, mustStruct(t, nil))
	assert.Equal(t, codes.AlreadyExists, code(err), "a successful stream keeps it: %v", err)
}
