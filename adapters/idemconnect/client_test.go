package idemconnect_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
)

// keyLog records the idempotency key of every call the handler sees.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (l *keyLog) add(h http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, h.Get("Idempotency-Key"))
}

func (l *keyLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

func newIdemClient(t *testing.T, opts ...idemconnect.Option) *idemconnect.Client {
	t.Helper()
	c, err := idemconnect.NewClient(append([]idemconnect.Option{idemconnect.WithProcedure[structpb.Struct](procCreate)}, opts...)...)
	require.NoError(t, err)
	return c
}

// Every attempt of one call carries the key drawn before the first: the
// handler, which fails twice with Unavailable (a transient error that
// releases the key), sees one key three times.
func TestClientKeepsOneKeyAcrossRetries(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		var log keyLog
		srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			log.add(req.Header())
			if len(log.all()) < 3 {
				srv.runs.Add(1)
				return nil, connect.NewError(connect.CodeUnavailable, errors.New("downstream unavailable"))
			}
			return srv.echo(ctx, req)
		}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		idem := newIdemClient(t, idemconnect.WithRetries(3), idemconnect.WithBackoff(time.Millisecond, 10*time.Millisecond))
		c := newClient(base, hc, procCreate, append(opts, connect.WithInterceptors(idem))...)

		r := call(callCtx(t), c, request(t, "alice", "", nil))
		require.NoError(t, r.err)
		keys := log.all()
		require.Len(t, keys, 3)
		assert.NotEmpty(t, keys[0])
		assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys)

		// A second call draws a key of its own.
		require.NoError(t, call(callCtx(t), c, request(t, "alice", "", nil)).err)
		keys = log.all()
		require.Len(t, keys, 4)
		assert.NotEqual(t, keys[0], keys[3])
	})
}

// A call refused as in progress is resent after the RetryInfo delay, with
// the same key, and gets the first call's response replayed: the handler
// runs once.
func TestClientRetriesInProgressIntoReplay(t *testing.T) {
	claims := newClaimCounter(t, 2)
	srv := &orders{}
	entered := make(chan struct{})
	srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		close(entered) // runs once, or the test fails on a double close
		// Held until the retried call has met the claim once.
		if err := claims.awaitClaims(ctx); err != nil {
			return nil, err
		}
		return srv.echo(ctx, req)
	}
	base, hc := serveIdem(t, testkit.NewEngineOn(t, claims), srv, idemconnect.WithEngineOptions(idemkit.WithRetryHint(20*time.Millisecond)))
	idem := newIdemClient(t, idemconnect.WithRetries(100), idemconnect.WithBackoff(time.Millisecond, time.Second))
	c := newClient(base, hc, procCreate, connect.WithInterceptors(idem))

	req := request(t, "alice", "caller-key", nil)
	firstDone := make(chan reply, 1)
	go func() { firstDone <- call(callCtx(t), newClient(base, hc, procCreate), req) }()
	<-entered
	second := call(callCtx(t), c, request(t, "alice", "caller-key", nil))
	first := <-firstDone
	require.NoError(t, first.err)
	require.NoError(t, second.err)
	assert.False(t, first.replayed)
	assert.True(t, second.replayed, "the resent call gets the first call's response")
	assert.True(t, proto.Equal(first.resp.Msg, second.resp.Msg))
	assert.EqualValues(t, 1, srv.runs.Load())
	assert.GreaterOrEqual(t, claims.claims.Load(), int32(2))
}

func TestClientRefusesMalformedCallerKey(t *testing.T) {
	srv := &orders{}
	base, hc := serveIdem(t, testkit.NewEngine(t), srv)
	c := newClient(base, hc, procCreate, connect.WithInterceptors(newIdemClient(t)))
	r := call(callCtx(t), c, request(t, "alice", `"unterminated`, nil))
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(r.err), r.err)
	assert.Zero(t, srv.runs.Load(), "not sent")
}

func TestClientGivesStreamsAKey(t *testing.T) {
	srv := &orders{}
	base, hc := serveIdem(t, testkit.NewEngine(t), srv)
	idem, err := idemconnect.NewClient(idemconnect.WithProcedure[structpb.Struct](procWatch))
	require.NoError(t, err)
	c := newClient(base, hc, procWatch, connect.WithInterceptors(idem))
	for range 2 {
		got, err := watch(callCtx(t), t, c, "alice", "")
		require.NoError(t, err, "each stream gets a fresh key")
		assert.Len(t, got, 1)
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}

// An interceptor installed on the wrong side fails every call instead of
// doing nothing.
func TestWrongSideRefused(t *testing.T) {
	srv := &orders{}
	base, hc := serve(t, srv, newIdemClient(t))
	r := call(callCtx(t), newClient(base, hc, procCreate), request(t, "alice", "k", nil))
	assert.Equal(t, connect.CodeInternal, connect.CodeOf(r.err), r.err)
	assert.Contains(t, r.err.Error(), "use a Server")

	s, err := idemconnect.NewServer(testkit.NewEngine(t), idemconnect.WithProcedure[structpb.Struct](procCreate), idemconnect.WithPrincipal(userPrincipal))
	require.NoError(t, err)
	base, hc = serve(t, srv, nil)
	r = call(callCtx(t), newClient(base, hc, procCreate, connect.WithInterceptors(s)), request(t, "alice", "k", nil))
	assert.Equal(t, connect.CodeInternal, connect.CodeOf(r.err), r.err)
	assert.Contains(t, r.err.Error(), "use a Client")
	assert.Zero(t, srv.runs.Load())
}
