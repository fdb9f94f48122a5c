package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idemkit/idemkit/adapters/idemconnect"
)

// Procedures of the Connect service: the same handler bare, after one
// raw Redis GET (the floor a replay from Redis cannot go below), and
// behind idemconnect's Server.
const (
	connectBare  = "/bench.Orders/CreateBare"
	connectFloor = "/bench.Orders/CreateFloor"
	connectIdem  = "/bench.Orders/Create"
)

// The messages are google.rpc.ResourceInfo, four string fields, standing
// for a generated order message (the build runs no protoc), as small as
// the JSON orders of the HTTP rows.
type order = errdetails.ResourceInfo

// connectCreate "creates an order": it counts a run and answers with a
// small message and a Location header.
func connectCreate(runs *atomic.Int64) func(context.Context, *connect.Request[order]) (*connect.Response[order], error) {
	return func(_ context.Context, req *connect.Request[order]) (*connect.Response[order], error) {
		id := runs.Add(1)
		resp := connect.NewResponse(&order{
			ResourceType: "order",
			ResourceName: strconv.FormatInt(id, 10),
			Owner:        req.Msg.GetOwner(),
			Description:  req.Msg.GetDescription() + ", created",
		})
		resp.Header().Set("Location", location(id))
		return resp, nil
	}
}

// newOrder is the request message of every Connect call.
func newOrder() *connect.Request[order] {
	req := connect.NewRequest(&order{ResourceType: "order", Owner: "bench-user", Description: "sku book-42, qty 1"})
	req.Header().Set(userHeader, "bench-user")
	req.Header().Set("Idempotency-Key", newKey())
	return req
}

// startConnect serves the bare, the floor and the protected procedure on
// one h2c loopback server (so gRPC works without TLS), the protected one behind
// idemconnect over redisstore (with a near cache when near is set), and
// returns its URL and an HTTP/2 client.
func startConnect(tb testing.TB, near bool) (string, *http.Client) {
	tb.Helper()
	idem, err := idemconnect.NewServer(newEngine(tb, near),
		idemconnect.WithProcedure[order](connectIdem),
		idemconnect.WithPrincipal(func(_ context.Context, h http.Header) (string, error) {
			return h.Get(userHeader), nil
		}))
	if err != nil {
		tb.Fatalf("idemconnect.NewServer: %v", err)
	}
	var runs atomic.Int64
	mux := http.NewServeMux()
	mux.Handle(connectBare, connect.NewUnaryHandler(connectBare, connectCreate(&runs)))
	rdb, create := floorClient(tb), connectCreate(&runs)
	mux.Handle(connectFloor, connect.NewUnaryHandler(connectFloor, func(ctx context.Context, req *connect.Request[order]) (*connect.Response[order], error) {
		if err := rdb.Get(ctx, floorKey).Err(); err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		return create(ctx, req)
	}))
	mux.Handle(connectIdem, connect.NewUnaryHandler(connectIdem, connectCreate(&runs), connect.WithInterceptors(idem)))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	tb.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tb.Cleanup(tr.CloseIdleConnections)
	return srv.URL, &http.Client{Transport: tr}
}

// BenchmarkConnectReplay makes, in every iteration, one call to the bare
// Connect handler, one to its one-GET floor and one replay through
// idemconnect's interceptor, in an order that rotates, on the same server
// and connection, over each protocol; -near puts a near cache in front of
// Redis, so a replay makes no round trip. It reports the median latency
// of each and the ratios replay/bare and replay/floor: a loaded machine
// slows all three alike.
func BenchmarkConnectReplay(b *testing.B) {
	for _, near := range []bool{false, true} {
		for _, p := range []struct {
			name string
			opts []connect.ClientOption
		}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}} {
			name := p.name
			if near {
				name += "-near"
			}
			b.Run(name, func(b *testing.B) {
				base, hc := startConnect(b, near)
				clients := make([]*connect.Client[order, order], 3) // bare, floor, replay
				for i, proc := range []string{connectBare, connectFloor, connectIdem} {
					clients[i] = connect.NewClient[order, order](hc, base+proc, p.opts...)
				}
				req := newOrder()
				ctx := context.Background()
				call := func(c *connect.Client[order, order]) time.Duration {
					start := time.Now()
					resp, err := c.CallUnary(ctx, req)
					d := time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					if resp.Header().Get("Location") == "" {
						b.Fatal("no Location")
					}
					return d
				}
				call(clients[2]) // the first execution, stored
				var ds [3][]time.Duration
				for i := 0; b.Loop(); i++ {
					for j := range 3 {
						k := (i + j) % 3
						ds[k] = append(ds[k], call(clients[k]))
					}
				}
				mb, mf, mr := median(ds[0]), median(ds[1]), median(ds[2])
				b.ReportMetric(float64(mb.Microseconds()), "bare-µs")
				b.ReportMetric(float64(mf.Microseconds()), "floor-µs")
				b.ReportMetric(float64(mr.Microseconds()), "replay-µs")
				b.ReportMetric(float64(mr)/float64(mb), "replay/bare")
				b.ReportMetric(float64(mr)/float64(mf), "replay/floor")
			})
		}
	}
}

// median returns the median of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		panic("median of nothing")
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkConnect makes one call per op, over the Connect protocol, to
// the bare handler (bare), to its one-GET floor (oneGET) or as a replay
// through idemconnect (replay): the rows callgrind.sh counts instructions
// of, one call at a time. The interceptor's increment is replay's count
// less oneGET's, to set beside idemhttp's (Replay/idemkit less
// OneGET/nethttp).
func BenchmarkConnect(b *testing.B) {
	for _, c := range []struct{ name, proc string }{{"bare", connectBare}, {"oneGET", connectFloor}, {"replay", connectIdem}} {
		b.Run(c.name, func(b *testing.B) {
			base, hc := startConnect(b, false)
			client := connect.NewClient[order, order](hc, base+c.proc)
			req := newOrder()
			ctx := context.Background()
			if _, err := client.CallUnary(ctx, req); err != nil { // stores the replayed response
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := client.CallUnary(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
