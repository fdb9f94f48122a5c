package idemconnect_test

import (
	"context"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
)

// watch opens the Watch stream with the user and key and reads it to its
// end, returning what it received and the error that ended it.
func watch(ctx context.Context, t *testing.T, c *connect.Client[structpb.Struct, structpb.Struct], user, key string) ([]*structpb.Struct, error) {
	t.Helper()
	stream, err := c.CallServerStream(ctx, request(t, user, key, map[string]any{"tick": 1}))
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.Close() }()
	var got []*structpb.Struct
	for stream.Receive() {
		got = append(got, stream.Msg())
	}
	return got, stream.Err()
}

// A selected stream is admitted once per key: repeats, however many race,
// are refused with AlreadyExists and a RetryInfo, and are not replayed.
func TestStreamClaimedOnceAndRefusedOnRepeat(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		c := newClient(base, hc, procWatch, opts...)

		const n = 20
		errs := make([]error, n)
		got := make([][]*structpb.Struct, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = watch(callCtx(t), t, c, "alice", "s1") })
		}
		wg.Wait()
		require.EqualValues(t, 1, srv.runs.Load(), "the stream handler runs once")
		admitted := 0
		for i, err := range errs {
			if err == nil {
				admitted++
				assert.Len(t, got[i], 1)
				continue
			}
			require.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), err)
			d, ok := idemconnect.RetryDelay(err)
			assert.True(t, ok, "RetryInfo detail")
			assert.Positive(t, d)
			assert.Empty(t, got[i], "a refused stream receives nothing")
		}
		assert.Equal(t, 1, admitted)

		_, err := watch(callCtx(t), t, c, "bob", "s1")
		require.NoError(t, err, "another principal's key is its own")
		_, err = watch(callCtx(t), t, c, "alice", "")
		assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), err)
		assert.EqualValues(t, 2, srv.runs.Load())
	})
}
