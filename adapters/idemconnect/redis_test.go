package idemconnect_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestTwoInstancesOneRedis runs two Connect servers, each with its own
// Redis client, store, engine and interceptor, over one Redis (started by
// the test on a free port), and sends bursts of concurrent calls with one
// key spread over both and over the three protocols: the handler runs
// exactly once per key in every round, and every call that succeeds gets
// the one response.
func TestTwoInstancesOneRedis(t *testing.T) {
	const rounds, burst = 10, 30
	srv := redistest.Start(t)
	o := &orders{}
	o.unary = func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		select { // a handler that takes a moment, so the burst meets it
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return o.echo(ctx, req)
	}
	var clients []*connect.Client[structpb.Struct, structpb.Struct]
	for range 2 {
		st, err := redisstore.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		base, hc := serveIdem(t, testkit.NewEngineOn(t, st), o)
		for _, p := range protocols {
			clients = append(clients, newClient(base, hc, procCreate, p.opt...))
		}
	}
	for round := range rounds {
		key := "burst-" + strconv.Itoa(round)
		before := o.runs.Load()
		replies := make([]reply, burst)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				<-start
				replies[i] = call(callCtx(t), clients[i%len(clients)], request(t, "alice", key, map[string]any{"round": round}))
			})
		}
		close(start)
		wg.Wait()
		var first *structpb.Struct
		for _, r := range replies {
			switch {
			case r.err == nil:
				if first == nil {
					first = r.resp.Msg
				} else if !proto.Equal(first, r.resp.Msg) {
					t.Fatalf("round %d: two responses %v and %v", round, first, r.resp.Msg)
				}
			case connect.CodeOf(r.err) != connect.CodeAborted:
				t.Fatalf("round %d: %v", round, r.err)
			}
		}
		if runs := o.runs.Load() - before; runs != 1 {
			t.Fatalf("round %d: handler ran %d times, want 1", round, runs)
		}
	}
}
