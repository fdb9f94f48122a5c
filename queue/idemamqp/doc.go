// Package idemamqp processes RabbitMQ (AMQP 0-9-1) messages once per
// message key: a Handler wraps the consumer's function, claims each
// delivery's key in an idemkit engine, runs the function only for the
// first delivery of a key, records its result, and acknowledges every
// delivery to match. Consume with manual acknowledgements (autoAck false).
//
//	h, err := idemamqp.NewHandler(engine, "billing", charge, idemamqp.WithRetryQueue(conn, "orders"))
//	...
//	deliveries, err := ch.Consume("orders", "", false, false, false, false, nil)
//	err = h.Serve(ctx, deliveries)            // or h.ServeBatches(ctx, deliveries, 50)
//
// It lives in a module of its own, so the idemkit library never depends on
// a broker client.
//
// # Keys
//
// A delivery's key is its MessageId property by default, or a business key
// (WithKey, HeaderKey; WithBodyKey for a member of a JSON body). The Handler's name is its own key space: two
// consumers of one message with different names each process it once. A
// message without a key is rejected without requeue, as is one whose key
// was first seen with another payload fingerprint (WithFingerprint, or
// WithInclude and WithVolatile, which name the body members that must
// match or do not count).
//
// # Acknowledgements
//
//   - first delivery of a key: fn runs; on success the result is recorded,
//     then the delivery is acked;
//   - a key already recorded (a redelivery, a duplicate publication): acked
//     without running fn; a recorded final failure is rejected;
//   - another delivery of the key is running: retried after the engine's
//     RetryAfter (at most WithRetryHint, at most the lease left), through
//     a delay queue (see Retries): an immediate requeue would spin;
//   - fn fails with a final error (the ErrorCodec of WithErrorCodec, or the
//     WithFinal predicate): Nack without requeue, which dead-letters where
//     the queue has a dead-letter exchange; a transient error, a panic or
//     a store failure: retried after a back-off delay (see Retries), and
//     the key is released for the retry;
//   - the same key with another body: answered by the key's record like
//     any copy (acked as a replay), and reported (Outcome.Mismatch, an
//     idemkit.EventMismatch, a warning); WithFingerprint rejects it
//     instead.
//
// # Retries
//
// A failed delivery is retried after a delay that doubles with its
// attempt number, from DefaultRetryDelay (1 s) up to DefaultMaxRetryDelay
// (1 min) (WithBackoff, WithRetryDelay). When attempt DefaultMaxAttempts
// (10, WithMaxAttempts) fails, the delivery is rejected without requeue:
// RabbitMQ dead-letters it to the queue's dead-letter exchange
// (x-dead-letter-exchange, by queue argument or policy) and, when the
// queue has none, discards it; the Handler logs it at Error either way.
// Declare a dead-letter exchange on every queue a Handler consumes. Store
// failures are retried with the same back-off but never exhaust a
// message. A handler panic is recovered: it is a failed attempt
// (Outcome.Panicked, Err wrapping ErrPanic, logged at Error with its
// stack), never recorded as a final failure, so the consumer goes on.
// WithReport hands every Outcome to a function, for metrics. A retried
// message keeps its key, so its effect still runs at most once: a failed
// attempt releases the key, a succeeded one records it.
//
// RabbitMQ has no delayed requeue, so where the delay is spent matters.
// With WithRetryQueue(conn, queue), which production consumers should
// set, a delivery to retry leaves the queue: the Handler publishes a copy
// (same body, properties and headers, with AttemptHeader set to the
// number of attempts that failed) to the delay queue of its delay,
// queue.idemkit.retry.<ms> (RetryQueueName), waits for the broker's
// publisher confirm, and only then acks the delivery (Outcome.Action
// Republish). The delay queue, which the Handler declares on first use
// (durable, x-message-ttl of its delay, dead-lettering to queue through
// the default exchange), holds the copy for the delay and then
// dead-letters it back to queue, behind the messages that arrived
// meanwhile. The Serve loop goes straight on to the next delivery, so a
// message that keeps failing never holds up the ones behind it, even with
// one loop at prefetch 1. There is one delay queue per back-off step
// (7 with the defaults; Handler.RetryQueues lists them), because a queue
// expires messages only at its head: in one shared queue a copy waiting
// 1 s would wait behind one waiting 1 min. A retry that is no fault of
// the message (another delivery of the key running, a store failure)
// goes to the step at or above its delay, and does not count as an
// attempt. A message's own Expiration does not survive a retry (the
// copy's is its delay, and RabbitMQ removes it when dead-lettering).
// Delete the delay queues when the consumer is retired.
//
// Nothing is lost on the way: when the copy cannot be published, is
// nacked, returned (the delay queue was deleted; the next retry declares
// it again) or not confirmed within 30 s or before ctx ends, the
// delivery is not acked but held for its delay and requeued, as without
// delay queues, and Outcome.Err says why. A crash (or a lost channel)
// between the confirm and the ack leaves both the copy and the
// redelivered original: two deliveries of one key, which the key's claim
// and record keep from running the effect twice, like any duplicate.
//
// The attempt number is one more than the largest of the delivery's
// AttemptHeader, the x-delivery-count a quorum queue sets on a
// redelivery, and the Handler's own count of the attempts it requeued
// with Nack. The header travels with the copy, so the count carries over
// to other consumer processes and connections, on classic queues too. A
// header that is missing, negative or not an integer counts 0 (a message
// gets more attempts, never fewer).
//
// Without WithRetryQueue the Handler cannot publish, and a delivery to
// retry is held in its Serve loop for the delay, then requeued with
// Nack; a classic queue puts it back at its old place, in front, and
// counts nothing, so the attempts are counted in memory per process (a
// message requeued between several consumer processes may get that many
// attempts each, and a restart starts again). A held delivery occupies
// its loop and a prefetch slot for the delay: with one Serve loop at
// prefetch 1, a failing message holds up the queue for the whole
// back-off (about four minutes with the defaults). Use this only where
// the delays are short or many loops share the prefetch.
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
