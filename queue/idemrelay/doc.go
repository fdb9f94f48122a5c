// Package idemrelay publishes the rows of a sqlstore outbox to a message
// broker: NATS JetStream (NewJetStream) or RabbitMQ (NewAMQP), and
// removes each row only after the broker confirmed its message.
//
//	st, _ := sqlstore.New(db, sqlstore.Postgres)        // the outbox: st.CreateOutbox
//	pub, _ := idemrelay.NewJetStream(js)
//	relay, _ := idemrelay.New(st, pub, idemrelay.WithBatchSize(100))
//	go relay.Run(ctx)
//
// Applications enqueue messages in their own transactions with
// sqlstore's View.Enqueue; see docs/outbox.md for the whole flow.
//
// # Guarantees
//
// A batch locks its rows (FOR UPDATE SKIP LOCKED; see
// sqlstore.Store.ClaimOutbox), publishes them, waits for the confirms,
// and removes the confirmed rows in the same transaction; rows that
// failed stay, due again after a back-off of their own. Several relays,
// in one process or many, share an outbox: a row is in at most one batch
// at a time. A relay that dies between the broker's confirm and the
// removal leaves its rows for another relay, which publishes them again
// with the same message id:
//
//   - JetStream drops the copy (Nats-Msg-Id) when it arrives within the
//     stream's duplicate window (2 minutes by default): each message is
//     stored once. A copy after the window is stored again.
//   - RabbitMQ stores the copy: delivery is at least once, with the same
//     message-id, which a consumer built with queue/idemamqp
//     deduplicates (its default key), so the effect runs once.
//
// # Failures and metrics
//
// A message the broker refuses, returns as unroutable, or does not
// confirm within WithPublishTimeout stays in the outbox and is tried
// again after a back-off that doubles with its attempts (WithBackoff).
// When a batch fails as a whole (the database or the broker unreachable),
// Run backs off the same way before the next batch. Nothing is removed
// that the broker did not confirm. Each batch's Report (WithObserver) and
// the counters of Stats give what was published, what failed, and the
// lag: the age of the oldest row of the last batch; Pending counts what
// waits in the outbox. The package imports no metrics library.
//
// It lives in a module of its own, so the idemkit library never depends on
// a broker client.
package idemrelay
