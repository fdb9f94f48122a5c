package idemnats_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/queue/idemnats"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrCardDeclined is a final failure: retrying cannot change it.
var ErrCardDeclined = errors.New("card declined")

func charge(ctx context.Context, msg jetstream.Msg) ([]byte, error) {
	// Charge the order in msg.Data(); the returned bytes are recorded and
	// replayed for every duplicate.
	return []byte("charged"), nil
}

// A pull consumer whose messages run once per Nats-Msg-Id: duplicates are
// acked without running charge, declined cards are terminated (and so are
// their duplicates), other failures are nakked for redelivery.
func Example() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	consumer, err := js.Consumer(ctx, "ORDERS", "billing")
	if err != nil {
		log.Fatal(err)
	}
	store, err := memstore.New() // a store shared by the consumer processes: redisstore
	if err != nil {
		log.Fatal(err)
	}
	engine, err := idemkit.New(store)
	if err != nil {
		log.Fatal(err)
	}
	h, err := idemnats.NewHandler(engine, "billing", charge,
		idemnats.WithErrorCodec(idemkit.FinalErrors(ErrCardDeclined)),
		idemnats.WithEngineOptions(idemkit.WithLease(10*time.Second)))
	if err != nil {
		log.Fatal(err)
	}
	cc, err := consumer.Consume(h.Handle)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	// ... run until shutdown
}

// Fetched batches claim all their keys with one engine call; here the key
// is a business key from a header, so an order published twice with two
// message IDs still runs once.
func ExampleHandler_Fetch() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	consumer, err := js.Consumer(ctx, "ORDERS", "billing")
	if err != nil {
		log.Fatal(err)
	}
	store, _ := memstore.New()
	engine, _ := idemkit.New(store)
	h, err := idemnats.NewHandler(engine, "billing", charge, idemnats.WithKey(idemnats.HeaderKey("Order-Id")))
	if err != nil {
		log.Fatal(err)
	}
	for ctx.Err() == nil {
		outs, err := h.Fetch(ctx, consumer, 100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			log.Print(err)
		}
		for _, out := range outs {
			if out.Action == idemnats.Term {
				log.Printf("terminated: %v", out.Err)
			}
		}
	}
}
