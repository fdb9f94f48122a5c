package idemgrpc_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/store/memstore"
)

// A client sends the same order twice with one idempotency key (say, its
// first answer timed out): the server creates the order once and the
// second call gets the stored response, marked as a replay.
func ExampleUnaryServerInterceptor() {
	store := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	srv := grpc.NewServer(grpc.UnaryInterceptor(idemgrpc.UnaryServerInterceptor(engine,
		idemgrpc.WithMethods("/test.Orders/Create"),
		idemgrpc.WithPrincipal(func(ctx context.Context) (string, error) {
			return "alice", nil // in production: the authenticated caller
		}),
	)))
	srv.RegisterService(&ordersDesc, &orders{}) // Create answers with a run counter
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, _ := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", "order-42")
	order, _ := structpb.NewStruct(map[string]any{"item": "book"})
	for range 2 {
		var header metadata.MD
		out := new(structpb.Struct)
		err := conn.Invoke(ctx, "/test.Orders/Create", order, out, grpc.Header(&header))
		fmt.Println(out.Fields["run"].GetNumberValue(), header.Get(idemgrpc.ReplayedHeader), err)
	}
	// Output:
	// 1 [] <nil>
	// 1 [true] <nil>
}

// The client interceptor gives each Create call a fresh idempotency key and
// resends it, with the same key, when the server is unavailable or answers
// that the first attempt is still running.
func ExampleUnaryClientInterceptor() {
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:50051",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(
			idemgrpc.WithMethods("/test.Orders/Create"),
			idemgrpc.WithRetries(3),
		)),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println("ready")
	// Output: ready
}
