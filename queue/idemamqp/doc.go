// Package idemamqp processes RabbitMQ (AMQP 0-9-1) messages once per
// message key: a Handler wraps the consumer's function, claims each
// delivery's key in an idemkit engine, runs the function only for the
// first delivery of a key, records its result, and acknowledges every
// delivery to match. Consume with manual acknowledgements (autoAck false).
//
//	h, err := idemamqp.NewHandler(engine, "billing", charge)
//	...
//	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
//	err = h.Serve(ctx, deliveries)            // or h.ServeBatches(ctx, deliveries, 50)
//
// It lives in a module of its own, so the idemkit library never depends on
// a broker client.
//
// # Keys
//
// A delivery's key is its MessageId property by default, or a business key
// (WithKey, HeaderKey). The Handler's name is its own key space: two
// consumers of one message with different names each process it once. A
// message without a key is rejected without requeue, as is one whose key
// was first seen with another payload fingerprint (WithFingerprint).
//
// # Acknowledgements
//
//   - first delivery of a key: fn runs; on success the result is recorded,
//     then the delivery is acked;
//   - a key already recorded (a redelivery, a duplicate publication): acked
//     without running fn; a recorded final failure is rejected;
//   - another delivery of the key is running: the delivery is held for the
//     engine's RetryAfter (at most WithRetryHint, at most the lease left),
//     then Nack with requeue: RabbitMQ has no delayed requeue, and an
//     immediate one would spin;
//   - fn fails with a final error (the ErrorCodec of WithErrorCodec, or the
//     WithFinal predicate): Nack without requeue, which dead-letters where
//     the queue has a dead-letter exchange; a transient error, a panic or
//     a store failure: held for a back-off delay, then requeued, and the
//     key is released for the retry;
//   - the same key with another body: answered by the key's record like
//     any copy (acked as a replay), and reported (Outcome.Mismatch, an
//     idemkit.EventMismatch, a warning); WithFingerprint rejects it
//     instead.
//
// # Retries
//
// A failed delivery is held for a delay that doubles with its attempt
// number, from DefaultRetryDelay (1 s) up to DefaultMaxRetryDelay (1 min)
// (WithBackoff, WithRetryDelay), then requeued. When attempt
// DefaultMaxAttempts (10, WithMaxAttempts) fails, the delivery is rejected
// without requeue: RabbitMQ dead-letters it to the queue's dead-letter
// exchange (x-dead-letter-exchange, by queue argument or policy) and,
// when the queue has none, discards it; the Handler logs it at Error
// either way. Declare a dead-letter exchange on every queue a Handler
// consumes. The attempt number is the x-delivery-count header a quorum
// queue sets, plus one; on a classic queue, which sets no count, the
// Handler counts the failed attempts of each key in memory (so a message
// requeued between several consumer processes may get that many
// attempts each, and a restart starts the count again). Store failures
// are retried with the same back-off but never exhaust a message. A
// handler panic is recovered: it is a failed attempt (Outcome.Panicked,
// Err wrapping ErrPanic, logged at Error with its stack), never recorded
// as a final failure, so the consumer goes on. WithReport hands every
// Outcome to a function, for metrics. A retried message keeps its key, so
// its effect still runs at most once: a failed attempt releases the key,
// a succeeded one records it.
//
// A held delivery occupies its Serve loop and a prefetch slot for the
// delay, and a classic queue requeues it at its old place, in front. So
// that a failing message does not hold up the ones behind it, run at
// least two Serve loops on a channel with a prefetch of at least two:
// while one loop holds the failing delivery, the others go on.
//
// The Redelivered flag is reported in Outcome and in the log but decides
// nothing: a first delivery can be a duplicate publication, and a
// redelivery may find nothing recorded, so the store decides.
//
// Once fn has succeeded the delivery is acked even when its result could
// not be recorded (the error is in Outcome.Err and the log), and a result
// too large to keep (idemkit.WithMaxResultSize) leaves a terminal record
// whose redeliveries are acked without running fn: running the
// effect again because of the idempotency store is the duplicate the
// Handler exists to prevent. HandleBatch and ServeBatches claim all the
// keys of a batch with one engine call, BeginBatch, which costs one store
// call on stores that implement store.Batcher.
//
// # Crashes
//
// A consumer that dies between the effect and the ack (after the record
// was written), or whose channel closes then (a lost connection, the
// broker's consumer_timeout), leaves the delivery unacked: the broker
// requeues it, the record answers the redelivery, and it is acked without
// the effect running again. A consumer that dies after claiming a key but
// before the effect leaves an in-progress claim: deliveries of the key are
// requeued after the retry hint until the claim's lease expires
// (WithLease; no heartbeat extends it once the process is gone), then a
// redelivery runs fn. Only a crash after the effect but before its record
// is written can repeat the effect; make that window small, or write the
// effect and the record in one transaction (idemkit's Claim.CompleteIn
// with a transactional store).
package idemamqp
