package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgrpc"
	"github.com/idemkit/idemkit/store/memstore"
)

// startExample serves the test Orders service (Create answers with a run
// counter, Watch echoes its request) behind opts on a loopback port, and
// returns a client connection and a function that stops both.
func startExample(sopt grpc.ServerOption, dopts ...grpc.DialOption) (*grpc.ClientConn, func()) {
	srv := grpc.NewServer(sopt)
	srv.RegisterService(&ordersDesc, &orders{})
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, _ := grpc.NewClient("passthrough:///"+lis.Addr().String(), dopts...)
	return conn, func() { _ = conn.Close(); srv.Stop() }
}

// A client sends the same order twice with one idempotency key (say, its
// first answer timed out): the server creates the order once and the
// second call gets the stored response, marked as a replay.
func ExampleServer_UnaryServerInterceptor() {
	store, _ := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	idem, err := idemgrpc.NewServer(engine,
		idemgrpc.WithMethods("/test.Orders/Create"),
		idemgrpc.WithPrincipal(func(ctx context.Context) (string, error) {
			return "alice", nil // in production: the authenticated caller
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, stop := startExample(grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))
	defer stop()

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

// A streaming import is admitted once per key inside the window (here 1
// minute): a second stream with the key is refused with AlreadyExists,
// whose RetryInfo says when the window ends.
func ExampleServer_StreamServerInterceptor() {
	store, _ := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	idem, err := idemgrpc.NewServer(engine,
		idemgrpc.WithMethods("/test.Orders/Watch"),
		idemgrpc.WithPrincipal(func(ctx context.Context) (string, error) { return "alice", nil }),
		idemgrpc.WithEngineOptions(idemkit.WithWindow(time.Minute)),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, stop := startExample(grpc.ChainStreamInterceptor(idem.StreamServerInterceptor()))
	defer stop()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", "import-7")
	for range 2 {
		n, err := watch(ctx, conn, "/test.Orders/Watch", &structpb.Struct{})
		fmt.Println(n, status.Code(err))
	}
	// Output:
	// 1 OK
	// 0 AlreadyExists
}

// The client gives each Create call a fresh idempotency key and resends it,
// with the same key, when the server is unavailable or answers that the
// first attempt is still running.
func ExampleClient_UnaryClientInterceptor() {
	client, err := idemgrpc.NewClient(
		idemgrpc.WithMethods("/test.Orders/Create"),
		idemgrpc.WithRetries(3),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:50051",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(client.UnaryClientInterceptor()),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println("ready")
	// Output: ready
}

// A call resent after a restart keeps the key it was first sent with
// (kept, say, in the outbox row), so the server replays instead of creating
// a second order. A health probe on a selected method skips the key.
func ExampleWithCallKey() {
	store, _ := memstore.New()
	defer store.Close()
	engine, _ := idemkit.New(store, idemkit.WithObserver(nil))
	idem, _ := idemgrpc.NewServer(engine,
		idemgrpc.WithMethods("/test.Orders/Create"),
		idemgrpc.WithPrincipal(func(ctx context.Context) (string, error) { return "alice", nil }),
		idemgrpc.WithOptionalKey(),
	)
	client, _ := idemgrpc.NewClient(idemgrpc.WithMethods("/test.Orders/Create"))
	conn, stop := startExample(grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()),
		grpc.WithChainUnaryInterceptor(client.UnaryClientInterceptor()))
	defer stop()

	order, _ := structpb.NewStruct(map[string]any{"item": "book"})
	call := func(opt grpc.CallOption) {
		out := new(structpb.Struct)
		err := conn.Invoke(context.Background(), "/test.Orders/Create", order, out, opt)
		fmt.Println(out.Fields["run"].GetNumberValue(), err)
	}
	call(idemgrpc.WithCallKey("outbox-17"))
	call(idemgrpc.WithCallKey("outbox-17"))
	call(idemgrpc.WithoutIdempotency())
	// Output:
	// 1 <nil>
	// 1 <nil>
	// 2 <nil>
}
