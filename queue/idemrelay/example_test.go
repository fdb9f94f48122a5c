package idemrelay_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/queue/idemrelay"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// A relay from a PostgreSQL outbox to NATS JetStream. The stream that
// captures "orders.>" keeps duplicates out for its duplicate window; an
// order's transaction enqueues its event with View.Enqueue.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlstore.New(db, sqlstore.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateOutbox(ctx); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	pub, _ := idemrelay.NewJetStream(js)
	relay, err := idemrelay.New(st, pub,
		idemrelay.WithBatchSize(100),
		idemrelay.WithBackoff(100*time.Millisecond, 30*time.Second),
		idemrelay.WithObserver(func(r idemrelay.Report) {
			if r.Err != nil {
				log.Printf("outbox: %d published, %d failed, lag %v: %v", r.Published, r.Failed, r.Lag, r.Err)
			}
		}))
	if err != nil {
		log.Fatal(err)
	}
	go relay.Run(ctx)

	// In an order's transaction: the order, then its event.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	// ... INSERT the order on tx ...
	if _, err := st.Tx(tx).Enqueue(ctx, sqlstore.Message{
		Scope: "user-1", Key: "order-42", Event: "order.placed",
		Subject: "orders.placed", Payload: []byte(`{"order":42}`),
	}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
