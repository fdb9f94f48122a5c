package idemgrpc_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

// A unary handler behind the server interceptor runs steps in its
// context: a retry after an error (which releases the key) skips the
// steps the first call recorded.
func TestUnaryHandlerStepsResume(t *testing.T) {
	var reserved, charged atomic.Int32
	var down atomic.Bool
	down.Store(true)
	srv := &orders{unary: func(ctx context.Context, _ string, _ *structpb.Struct) (*structpb.Struct, error) {
		if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) { reserved.Add(1); return nil, nil }); err != nil {
			return nil, err
		}
		if _, err := idemkit.Step(ctx, "charge", func(context.Context) ([]byte, error) {
			charged.Add(1)
			if down.Load() {
				return nil, status.Error(codes.Unavailable, "provider down")
			}
			return nil, nil
		}); err != nil {
			return nil, err
		}
		return structpb.NewStruct(map[string]any{"paid": true})
	}}
	conn := serveIdem(t, testkit.NewEngine(t), srv)
	call := func() error {
		return conn.Invoke(callCtx(t, "alice", "order-1"), methodCreate, mustStruct(t, nil), new(structpb.Struct))
	}
	require.Equal(t, codes.Unavailable, status.Code(call()))
	down.Store(false)
	require.NoError(t, call())
	require.NoError(t, call())
	assert.EqualValues(t, 1, reserved.Load(), "the recorded step did not run again")
	assert.EqualValues(t, 2, charged.Load())
}
