package idemconnect_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
)

// eachProtocol runs f once per protocol, against a server of its own.
func eachProtocol(t *testing.T, f func(t *testing.T, opts []connect.ClientOption)) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) { f(t, p.opt) })
	}
}

func TestMissingKey(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		r := call(callCtx(t), newClient(base, hc, procCreate, opts...), request(t, "alice", "", nil))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(r.err), r.err)
		assert.Contains(t, r.err.Error(), "missing Idempotency-Key")
		assert.Zero(t, srv.runs.Load())
	})
}

func TestOptionalKeyPassesThrough(t *testing.T) {
	srv := &orders{}
	base, hc := serveIdem(t, testkit.NewEngine(t), srv, idemconnect.WithOptionalKey())
	c := newClient(base, hc, procCreate)
	for range 2 {
		r := call(callCtx(t), c, request(t, "alice", "", nil))
		require.NoError(t, r.err)
		assert.False(t, r.replayed)
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}

func TestMalformedKeys(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		c := newClient(base, hc, procCreate, opts...)
		for name, values := range map[string][]string{
			"empty":              {""},
			"too long":           {strings.Repeat("k", keying.MaxKeyLen+1)},
			"twice":              {"a", "b"},
			"unterminated quote": {`"abc`},
			"not a token":        {"a b,c"},
		} {
			req := request(t, "alice", "", nil)
			req.Header()["Idempotency-Key"] = values
			r := call(callCtx(t), c, req)
			require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(r.err), "%s: %v", name, r.err)
			for _, v := range values {
				if len(v) > 3 {
					assert.NotContains(t, r.err.Error(), v, "%s: the key is not quoted back", name)
				}
			}
		}
		assert.Zero(t, srv.runs.Load())
		r := call(callCtx(t), c, request(t, "alice", strings.Repeat("k", keying.MaxKeyLen), nil))
		require.NoError(t, r.err, "a key of MaxKeyLen bytes is accepted")
		assert.EqualValues(t, 1, srv.runs.Load())
	})
}

func TestPayloadMismatch(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		c := newClient(base, hc, procCreate, opts...)
		require.NoError(t, call(callCtx(t), c, request(t, "alice", "k", map[string]any{"qty": 1})).err)
		r := call(callCtx(t), c, request(t, "alice", "k", map[string]any{"qty": 2}))
		assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(r.err), r.err)
		assert.EqualValues(t, 1, srv.runs.Load())
	})
}

func TestInFlightRepeatIsAbortedWithRetryInfo(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		entered, release := make(chan struct{}), make(chan struct{})
		srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			close(entered)
			<-release
			return srv.echo(ctx, req)
		}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv, idemconnect.WithEngineOptions(idemkit.WithRetryHint(1500*time.Millisecond)))
		c := newClient(base, hc, procCreate, opts...)

		firstDone := make(chan reply, 1)
		go func() { firstDone <- call(callCtx(t), c, request(t, "alice", "k", nil)) }()
		<-entered
		r := call(callCtx(t), c, request(t, "alice", "k", nil))
		require.Equal(t, connect.CodeAborted, connect.CodeOf(r.err), r.err)
		d, ok := idemconnect.RetryDelay(r.err)
		require.True(t, ok, "RetryInfo detail")
		assert.Positive(t, d)
		assert.LessOrEqual(t, d, 1500*time.Millisecond)
		var ce *connect.Error
		require.ErrorAs(t, r.err, &ce)
		var info *errdetails.RetryInfo
		for _, det := range ce.Details() {
			v, err := det.Value()
			require.NoError(t, err)
			if ri, ok := v.(*errdetails.RetryInfo); ok {
				info = ri
			}
		}
		require.NotNil(t, info)
		assert.Equal(t, "2", ce.Meta().Get("Retry-After"), "seconds, rounded up")
		if name := t.Name(); strings.HasSuffix(name, "/grpc") || strings.HasSuffix(name, "/grpcweb") {
			assert.Equal(t, "1500", ce.Meta().Get("Grpc-Retry-Pushback-Ms"), "grpc-go's retry policy reads it")
		} else {
			assert.Empty(t, ce.Meta().Get("Grpc-Retry-Pushback-Ms"))
		}

		close(release)
		first := <-firstDone
		require.NoError(t, first.err)
		again := call(callCtx(t), c, request(t, "alice", "k", nil))
		require.NoError(t, again.err)
		assert.True(t, again.replayed)
		assert.True(t, proto.Equal(first.resp.Msg, again.resp.Msg))
		assert.EqualValues(t, 1, srv.runs.Load())
	})
}

// The replay gives back the message, the headers and the trailers of the
// first response, those of the *connect.Response and those set through
// the call info, over every protocol, including one other than the first
// call's.
func TestReplayEqualsOriginal(t *testing.T) {
	for _, first := range protocols {
		t.Run(first.name, func(t *testing.T) {
			srv := &orders{}
			srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
				info, ok := connect.CallInfoForHandlerContext(ctx)
				require.True(t, ok)
				info.ResponseHeader().Set("X-From-Info", "h")
				info.ResponseTrailer().Set("X-Trailer-From-Info", "t")
				return srv.echo(ctx, req)
			}
			base, hc := serveIdem(t, testkit.NewEngine(t), srv)
			in := map[string]any{"item": "pen", "tags": []any{"a", "b"}, "nested": map[string]any{"x": 1.5}}
			orig := call(callCtx(t), newClient(base, hc, procCreate, first.opt...), request(t, "alice", "k1", in))
			require.NoError(t, orig.err)
			assert.False(t, orig.replayed)
			for _, p := range protocols {
				again := call(callCtx(t), newClient(base, hc, procCreate, p.opt...), request(t, "alice", "k1", in))
				require.NoError(t, again.err, p.name)
				assert.True(t, again.replayed, p.name)
				assert.True(t, proto.Equal(orig.resp.Msg, again.resp.Msg), "%s: replay %v, original %v", p.name, again.resp.Msg, orig.resp.Msg)
				for _, h := range []string{"X-Order-Run", "X-Tag", "X-From-Info"} {
					assert.Equal(t, orig.resp.Header().Values(h), again.resp.Header().Values(h), "%s: header %s", p.name, h)
					assert.NotEmpty(t, again.resp.Header().Values(h), "%s: header %s", p.name, h)
				}
				for _, h := range []string{"X-Checksum", "X-Trailer-From-Info"} {
					assert.Equal(t, orig.resp.Trailer().Values(h), again.resp.Trailer().Values(h), "%s: trailer %s", p.name, h)
					assert.NotEmpty(t, again.resp.Trailer().Values(h), "%s: trailer %s", p.name, h)
				}
			}
			assert.EqualValues(t, 1, srv.runs.Load())
			other := call(callCtx(t), newClient(base, hc, procCreate), request(t, "alice", "k2", in))
			require.NoError(t, other.err)
			assert.False(t, other.replayed)
			assert.EqualValues(t, 2, srv.runs.Load(), "another key runs again")
		})
	}
}

func TestConcurrentCallsWithOneKeyRunOnce(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		const n = 40
		// The first call stays in flight until every call has tried to
		// claim the key: the other n-1 all find it in progress.
		claims := newClaimCounter(t, n)
		srv := &orders{}
		srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			if err := claims.awaitClaims(ctx); err != nil {
				return nil, err
			}
			return srv.echo(ctx, req)
		}
		base, hc := serveIdem(t, testkit.NewEngineOn(t, claims), srv)
		c := newClient(base, hc, procCreate, opts...)
		in := map[string]any{"item": "book", "qty": 2}

		replies := make([]reply, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { replies[i] = call(callCtx(t), c, request(t, "alice", "k-n", in)) })
		}
		wg.Wait()

		require.EqualValues(t, 1, srv.runs.Load(), "handler runs")
		fresh := 0
		var first *structpb.Struct
		for _, r := range replies {
			if r.err != nil {
				require.Equal(t, connect.CodeAborted, connect.CodeOf(r.err), r.err)
				d, ok := idemconnect.RetryDelay(r.err)
				assert.True(t, ok)
				assert.Positive(t, d)
				continue
			}
			// A call whose claim was counted before the store saw it can
			// find the first call completed: it gets the replay.
			if !r.replayed {
				fresh++
			}
			if first == nil {
				first = r.resp.Msg
			}
			assert.True(t, proto.Equal(first, r.resp.Msg), "every success carries the same response")
		}
		assert.Equal(t, 1, fresh, "exactly one response is not a replay")
		after := call(callCtx(t), c, request(t, "alice", "k-n", in))
		require.NoError(t, after.err)
		assert.True(t, after.replayed)
		assert.EqualValues(t, 1, srv.runs.Load())
	})
}

func TestOversizedResponseIsTerminal(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv, idemconnect.WithEngineOptions(idemkit.WithMaxResultSize(64)))
		c := newClient(base, hc, procCreate, opts...)
		big := map[string]any{"blob": strings.Repeat("x", 500)}
		first := call(callCtx(t), c, request(t, "alice", "k", big))
		require.NoError(t, first.err, "the first call gets its response")
		assert.Len(t, first.resp.Msg.GetFields()["blob"].GetStringValue(), 500)
		for range 2 {
			r := call(callCtx(t), c, request(t, "alice", "k", big))
			require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(r.err), r.err)
			assert.True(t, r.replayed)
		}
		assert.EqualValues(t, 1, srv.runs.Load(), "the handler never runs twice")
	})
}

func TestPrincipalsAreIsolated(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		c := newClient(base, hc, procCreate, opts...)
		alice := call(callCtx(t), c, request(t, "alice", "shared", map[string]any{"who": "alice"}))
		bob := call(callCtx(t), c, request(t, "bob", "shared", map[string]any{"who": "bob"}))
		require.NoError(t, alice.err)
		require.NoError(t, bob.err, "another principal's key is not a mismatch")
		assert.False(t, bob.replayed)
		assert.Equal(t, "bob", bob.resp.Msg.GetFields()["who"].GetStringValue())
		again := call(callCtx(t), c, request(t, "alice", "shared", map[string]any{"who": "alice"}))
		require.NoError(t, again.err)
		assert.True(t, again.replayed)
		assert.True(t, proto.Equal(alice.resp.Msg, again.resp.Msg))
		assert.EqualValues(t, 2, srv.runs.Load())
	})
}

func TestUnauthenticatedCallerRefused(t *testing.T) {
	srv := &orders{}
	base, hc := serveIdem(t, testkit.NewEngine(t), srv)
	r := call(callCtx(t), newClient(base, hc, procCreate), request(t, "", "k", nil))
	assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(r.err), r.err)
	assert.NotContains(t, r.err.Error(), "no user", "the principal function's text stays on the server")
	assert.Zero(t, srv.runs.Load())
}

func TestFinalErrorReplayedAsSameError(t *testing.T) {
	eachProtocol(t, func(t *testing.T, opts []connect.ClientOption) {
		srv := &orders{}
		srv.unary = func(context.Context, *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			srv.runs.Add(1)
			ce := connect.NewError(connect.CodeNotFound, errors.New("no such customer"))
			d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: "CUSTOMER_UNKNOWN", Domain: "test"})
			if err != nil {
				return nil, err
			}
			ce.AddDetail(d)
			ce.Meta().Set("X-Lookup", "customers")
			return nil, ce
		}
		base, hc := serveIdem(t, testkit.NewEngine(t), srv)
		c := newClient(base, hc, procCreate, opts...)
		first := call(callCtx(t), c, request(t, "alice", "k", nil))
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(first.err))
		assert.False(t, first.replayed)
		second := call(callCtx(t), c, request(t, "alice", "k", nil))
		assert.True(t, second.replayed)
		var e1, e2 *connect.Error
		require.ErrorAs(t, first.err, &e1)
		require.ErrorAs(t, second.err, &e2)
		assert.Equal(t, e1.Code(), e2.Code())
		assert.Equal(t, e1.Message(), e2.Message())
		require.Len(t, e2.Details(), 1)
		v, err := e2.Details()[0].Value()
		require.NoError(t, err)
		assert.Equal(t, "CUSTOMER_UNKNOWN", v.(*errdetails.ErrorInfo).GetReason())
		assert.Equal(t, "customers", e2.Meta().Get("X-Lookup"))
		assert.EqualValues(t, 1, srv.runs.Load())
	})
}

func TestTransientErrorRunsAgain(t *testing.T) {
	srv := &orders{}
	srv.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		if srv.runs.Load() == 0 {
			srv.runs.Add(1)
			return nil, connect.NewError(connect.CodeInternal, errors.New("database hiccup"))
		}
		return srv.echo(ctx, req)
	}
	base, hc := serveIdem(t, testkit.NewEngine(t), srv)
	c := newClient(base, hc, procCreate)
	first := call(callCtx(t), c, request(t, "alice", "k", nil))
	require.Equal(t, connect.CodeInternal, connect.CodeOf(first.err))
	second := call(callCtx(t), c, request(t, "alice", "k", nil))
	require.NoError(t, second.err)
	assert.False(t, second.replayed)
	assert.EqualValues(t, 2, srv.runs.Load())
}

func TestUnselectedProcedurePassesThrough(t *testing.T) {
	srv := &orders{}
	base, hc := serveIdem(t, testkit.NewEngine(t), srv)
	c := newClient(base, hc, procGet)
	for range 2 {
		r := call(callCtx(t), c, request(t, "alice", "k", nil))
		require.NoError(t, r.err)
		assert.False(t, r.replayed)
	}
	assert.EqualValues(t, 2, srv.runs.Load())
}
