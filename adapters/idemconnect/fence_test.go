package idemconnect_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
)

// fenceLog records the fence header of every call the service gets.
type fenceLog struct {
	mu   sync.Mutex
	seen []string
}

func (f *fenceLog) add(h http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, h.Get(idemconnect.FenceHeader))
}

func (f *fenceLog) last(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.seen, "the server got a call")
	return f.seen[len(f.seen)-1]
}

// Inside Do's fn, every unary call and stream through a Client with
// WithFenceHeader carries the claim's fencing token, selected or not;
// outside a claim none; a token the caller set is kept.
func TestClientForwardsTheFence(t *testing.T) {
	var f fenceLog
	srv := &orders{}
	srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		f.add(req.Header())
		return srv.echo(ctx, req)
	}
	mux := http.NewServeMux()
	mux.Handle(procCreate, connect.NewUnaryHandler(procCreate, srv.create))
	mux.Handle(procGet, connect.NewUnaryHandler(procGet, srv.create))
	mux.Handle(procWatch, connect.NewServerStreamHandler(procWatch, func(ctx context.Context, req *connect.Request[structpb.Struct], ss *connect.ServerStream[structpb.Struct]) error {
		f.add(req.Header())
		return ss.Send(req.Msg)
	}))
	base, hc := serveMux(t, mux)
	idem := newIdemClient(t, idemconnect.WithFenceHeader(idemconnect.FenceHeader))
	create := newClient(base, hc, procCreate, connect.WithInterceptors(idem))
	get := newClient(base, hc, procGet, connect.WithInterceptors(idem))
	stream := newClient(base, hc, procWatch, connect.WithInterceptors(idem))

	e := testkit.NewEngine(t)
	var fence uint64
	_, err := e.Do(callCtx(t), "work", "fp", func(ctx context.Context) ([]byte, error) {
		var ok bool
		fence, ok = idemkit.FenceFromContext(ctx)
		require.True(t, ok)
		want := strconv.FormatUint(fence, 10)
		require.NoError(t, call(ctx, create, request(t, "alice", "", nil)).err)
		assert.Equal(t, want, f.last(t), "selected unary call")
		require.NoError(t, call(ctx, get, request(t, "alice", "", nil)).err)
		assert.Equal(t, want, f.last(t), "unselected unary call")
		_, err := watch(ctx, t, stream, "alice", "")
		require.NoError(t, err)
		assert.Equal(t, want, f.last(t), "stream")
		req := request(t, "alice", "", nil)
		req.Header().Set(idemconnect.FenceHeader, "7")
		require.NoError(t, call(ctx, create, req).err)
		assert.Equal(t, "7", f.last(t), "the caller's own header is kept")
		return []byte("done"), nil
	})
	require.NoError(t, err)
	require.NoError(t, call(callCtx(t), create, request(t, "alice", "", nil)).err)
	assert.Empty(t, f.last(t), "outside a claim no fence is sent")
}

func TestFenceFromHeader(t *testing.T) {
	for name, c := range map[string]struct {
		values  []string
		fence   uint64
		present bool
		err     error
	}{
		"absent":      {},
		"one":         {values: []string{"42"}, fence: 42, present: true},
		"max":         {values: []string{"18446744073709551615"}, fence: 1<<64 - 1, present: true},
		"overflow":    {values: []string{"18446744073709551616"}, present: true, err: idemconnect.ErrMalformedFence},
		"not decimal": {values: []string{"0x2a"}, present: true, err: idemconnect.ErrMalformedFence},
		"repeated":    {values: []string{"1", "2"}, present: true, err: idemconnect.ErrMalformedFence},
	} {
		h := http.Header{}
		if c.values != nil {
			h[idemconnect.FenceHeader] = c.values
		}
		fence, present, err := idemconnect.FenceFromHeader(h, idemconnect.FenceHeader)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, name)
			assert.Equal(t, c.present, present, name)
			continue
		}
		require.NoError(t, err, name)
		assert.Equal(t, c.fence, fence, name)
		assert.Equal(t, c.present, present, name)
	}
	_, _, err := idemconnect.FenceFromHeader(http.Header{}, "grpc-fence")
	assert.True(t, errors.Is(err, idemkit.ErrInvalid), "%v", err)
}
