package idemconnect_test

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/internal/testkit"
)

// A stored response whose procedure responds with another type after a
// deploy is not replayed as the wrong message: the repeat fails with
// Internal, unmarked, and the handler does not run.
func TestStoredResponseOfAnotherTypeIsNotReplayed(t *testing.T) {
	e := testkit.NewEngine(t)
	srv := &orders{}
	base, hc := serveIdem(t, e, srv)
	first := call(callCtx(t), newClient(base, hc, procCreate), request(t, "alice", "k", nil))
	require.NoError(t, first.err)

	after, err := idemconnect.NewServer(e, idemconnect.WithProcedure[structpb.ListValue](procCreate), idemconnect.WithPrincipal(userPrincipal))
	require.NoError(t, err)
	base, hc = serve(t, srv, after)
	r := call(callCtx(t), newClient(base, hc, procCreate), request(t, "alice", "k", nil))
	require.Equal(t, connect.CodeInternal, connect.CodeOf(r.err), r.err)
	assert.False(t, r.replayed)
	assert.Contains(t, r.err.Error(), "google.protobuf.Struct")
	assert.EqualValues(t, 1, srv.runs.Load())
}

// A procedure whose generated schema responds with another type than
// WithProcedure's is refused before its handler runs: its response could
// be stored but never given back.
func TestSchemaOfAnotherResponseTypeRefused(t *testing.T) {
	md := healthpb.File_grpc_health_v1_health_proto.Services().ByName("Health").Methods().ByName("Check")
	const proc = "/grpc.health.v1.Health/Check"
	idem, err := idemconnect.NewServer(testkit.NewEngine(t), idemconnect.WithProcedure[structpb.Struct](proc), idemconnect.WithPrincipal(userPrincipal))
	require.NoError(t, err)
	srv := &orders{}
	mux := http.NewServeMux()
	mux.Handle(proc, connect.NewUnaryHandler(proc, srv.create, connect.WithSchema(md), connect.WithInterceptors(idem)))
	base, hc := serveMux(t, mux)
	r := call(callCtx(t), newClient(base, hc, proc), request(t, "alice", "k", nil))
	require.Equal(t, connect.CodeInternal, connect.CodeOf(r.err), r.err)
	assert.Contains(t, r.err.Error(), "grpc.health.v1.HealthCheckResponse")
	assert.Zero(t, srv.runs.Load())
}
