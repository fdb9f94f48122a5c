package idemamqp_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
	"github.com/idemkit/idemkit/store/memstore"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrCardDeclined is a final failure: retrying cannot change it.
var ErrCardDeclined = errors.New("card declined")

func charge(ctx context.Context, d *amqp.Delivery) ([]byte, error) {
	// Charge the order in d.Body; the returned bytes are recorded and
	// replayed for every duplicate.
	return []byte("charged"), nil
}

// A consumer whose messages run once per MessageId: duplicates are acked
// without running charge, declined cards are rejected (dead-lettered where
// the queue has a dead-letter exchange), other failures wait in delay
// queues and come back to "orders" (at most 10 attempts).
func Example() {
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := ch.Qos(20, 0, false); err != nil {
		log.Fatal(err)
	}
	deliveries, err := ch.Consume("orders", "billing", false, false, false, false, nil) // manual acks
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
	h, err := idemamqp.NewHandler(engine, "billing", charge,
		idemamqp.WithErrorCodec(idemkit.FinalErrors(ErrCardDeclined)),
		idemamqp.WithRetryQueue(conn, "orders"),
		idemamqp.WithEngineOptions(idemkit.WithLease(10*time.Second)))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	if err := h.Serve(context.Background(), deliveries); err != nil {
		log.Print(err)
	}
	// Serve returned nil: the channel closed; reconnect and serve again.
}

// Batches claim all their keys with one engine call; here the key is a
// business key from a header, so an order published twice with two
// message IDs still runs once.
func ExampleHandler_ServeBatches() {
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	_ = ch.Qos(50, 0, false) // at least the batch size
	deliveries, err := ch.Consume("orders", "billing", false, false, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	store, _ := memstore.New()
	engine, _ := idemkit.New(store)
	h, err := idemamqp.NewHandler(engine, "billing", charge, idemamqp.WithKey(idemamqp.HeaderKey("Order-Id")))
	if err != nil {
		log.Fatal(err)
	}
	_ = h.ServeBatches(context.Background(), deliveries, 50)
}
