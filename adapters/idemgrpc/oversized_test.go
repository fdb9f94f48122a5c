package idemgrpc_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// oversizedOrders answers Create with a response over a 256-byte result
// cap, counting its runs. Given claims, it keeps the first call in flight
// until claims has seen its calls claim the key.
func oversizedOrders(claims *claimCounter) *orders {
	srv := &orders{}
	srv.unary = func(ctx context.Context, _ string, _ *structpb.Struct) (*structpb.Struct, error) {
		srv.runs.Add(1)
		if claims != nil {
			if err := claims.awaitClaims(ctx); err != nil {
				return nil, err
			}
		}
		return structpb.NewStruct(map[string]any{"blob": strings.Repeat("b", 1024)})
	}
	return srv
}

// cappedEngine is an engine over s whose results may not exceed 256 bytes.
func cappedEngine(t *testing.T, s store.Store, opts ...idemkit.Option) *idemkit.Engine {
	t.Helper()
	return testkit.NewEngineOn(t, s, append([]idemkit.Option{idemkit.WithMaxResultSize(256)}, opts...)...)
}

// TestOversizedResponseIsNeverRunAgain sends one key from many clients at
// once, over a real gRPC server, to a handler whose response is over the
// engine's result cap. The handler runs once; its caller gets the
// response; every other call, and every later retry, gets
// ResourceExhausted marked replayed, and the handler does not run again.
func TestOversizedResponseIsNeverRunAgain(t *testing.T) {
	const n = 30
	claims := newClaimCounter(t, n)
	srv := oversizedOrders(claims)
	conn := serveIdem(t, cappedEngine(t, claims), srv, idemgrpc.WithEngineOptions(idemkit.WithWait(time.Millisecond)))
	in := mustStruct(t, map[string]any{"item": "book"})
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { replies[i] = create(callCtx(t, "alice", "big"), conn, in) })
	}
	wg.Wait()
	require.EqualValues(t, 1, srv.runs.Load(), "handler runs")
	fresh := 0
	for _, r := range replies {
		if r.err == nil {
			fresh++
			assert.False(t, r.replayed)
			assert.Len(t, r.out.GetFields()["blob"].GetStringValue(), 1024, "the call that ran gets its response")
			continue
		}
		requireNotStored(t, r)
	}
	assert.Equal(t, 1, fresh)
	for range 3 {
		requireNotStored(t, create(callCtx(t, "alice", "big"), conn, in))
	}
	assert.EqualValues(t, 1, srv.runs.Load(), "a retry ran the handler again")

	// Another payload under the key is still a mismatch, not a replay.
	r := create(callCtx(t, "alice", "big"), conn, mustStruct(t, map[string]any{"item": "pen"}))
	assert.Equal(t, codes.FailedPrecondition, code(r.err), r.err)
}

func requireNotStored(t *testing.T, r reply) {
	t.Helper()
	require.Equal(t, codes.ResourceExhausted, code(r.err), r.err)
	assert.True(t, r.replayed, "the terminal outcome is a replay")
	assert.Contains(t, status.Convert(r.err).Message(), "too large to keep")
}

// TestOversizedResponseReleaseKey: with idemkit.ReleaseKey in the engine
// options, the key is released and a retry runs the handler again.
func TestOversizedResponseReleaseKey(t *testing.T) {
	srv := oversizedOrders(nil)
	conn := serveIdem(t, cappedEngine(t, testkit.NewMem(t)), srv, idemgrpc.WithEngineOptions(idemkit.WithOversized(idemkit.ReleaseKey)))
	in := mustStruct(t, nil)
	for i := range 3 {
		r := create(callCtx(t, "alice", "big"), conn, in)
		require.NoError(t, r.err)
		assert.False(t, r.replayed)
		assert.EqualValues(t, i+1, srv.runs.Load())
	}
}

func TestOversizedOptionIsValidated(t *testing.T) {
	_, err := idemgrpc.NewServer(testkit.NewEngine(t), idemgrpc.WithMethods(methodCreate), idemgrpc.WithPrincipal(userPrincipal),
		idemgrpc.WithEngineOptions(idemkit.WithOversized(9)))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}
