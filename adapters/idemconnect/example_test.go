package idemconnect_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemconnect"
	"github.com/idemkit/idemkit/store/memstore"
)

// A Connect handler behind a Server, called twice over gRPC through a
// Client that retries: the second call carries the key the first used,
// and gets the stored response back without running the handler.
func Example() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	engine, err := idemkit.New(store, idemkit.WithObserver(nil))
	if err != nil {
		log.Fatal(err)
	}

	const create = "/shop.v1.Orders/Create"
	idem, err := idemconnect.NewServer(engine,
		idemconnect.WithProcedure[structpb.Struct](create),
		idemconnect.WithPrincipal(func(_ context.Context, h http.Header) (string, error) {
			if u := h.Get("X-User"); u != "" { // a verified identity in a real service
				return u, nil
			}
			return "", errors.New("no user")
		}))
	if err != nil {
		log.Fatal(err)
	}
	var runs atomic.Int32
	handler := func(_ context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		runs.Add(1)
		resp := connect.NewResponse(&structpb.Struct{Fields: map[string]*structpb.Value{
			"order": structpb.NewStringValue("ord-1"),
			"item":  req.Msg.GetFields()["item"],
		}})
		resp.Header().Set("Location", "/orders/ord-1")
		return resp, nil
	}
	mux := http.NewServeMux()
	mux.Handle(create, connect.NewUnaryHandler(create, handler, connect.WithInterceptors(idem)))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true) // gRPC without TLS
	srv.Start()
	defer srv.Close()

	keys, err := idemconnect.NewClient(idemconnect.WithProcedure[structpb.Struct](create), idemconnect.WithRetries(2))
	if err != nil {
		log.Fatal(err)
	}
	transport := &http.Transport{Protocols: new(http.Protocols)}
	transport.Protocols.SetUnencryptedHTTP2(true)
	defer transport.CloseIdleConnections()
	client := connect.NewClient[structpb.Struct, structpb.Struct](&http.Client{Transport: transport},
		srv.URL+create, connect.WithGRPC(), connect.WithInterceptors(keys))

	req := connect.NewRequest(&structpb.Struct{Fields: map[string]*structpb.Value{"item": structpb.NewStringValue("book")}})
	req.Header().Set("X-User", "alice")
	for range 2 { // the same request, as a retry after a lost response would send it
		resp, err := client.CallUnary(context.Background(), req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(resp.Msg.GetFields()["order"].GetStringValue(), resp.Header().Get("Location"),
			"replayed:", resp.Header().Get(idemconnect.ReplayedHeader) == "true")
	}
	fmt.Println("handler runs:", runs.Load())
	// Output:
	// ord-1 /orders/ord-1 replayed: false
	// ord-1 /orders/ord-1 replayed: true
	// handler runs: 1
}
