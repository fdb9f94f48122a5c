// Package idemnats processes NATS JetStream messages once per message key:
// a Handler wraps the consumer's function, claims each delivery's key in an
// idemkit engine, runs the function only for the first delivery of a key,
// records its result, and acknowledges every delivery to match.
//
//	h, err := idemnats.NewHandler(engine, "billing", charge,
//		idemnats.WithKey(idemnats.HeaderKey("Order-Id")))
//	...
//	cc, err := consumer.Consume(h.Handle)             // pull or push consumer
//	outs, err := h.Fetch(ctx, consumer, 100, jetstream.FetchMaxWait(time.Second))
//
// It lives in a module of its own, so the idemkit library never depends on
// a broker client.
//
// # Keys
//
// A delivery's key is its Nats-Msg-Id header by default, or a business key
// (WithKey with HeaderKey or a function, or WithBodyKey for a member of a
// JSON body, such as an event id): use a business key when one logical message can be published
// twice with different message IDs, or outside the stream's duplicate
// window. The Handler's name is its own key space: two consumers of one
// stream with different names each process every message once. A message
// without a key is terminated, as is one whose key was first seen with
// another payload fingerprint (WithFingerprint, or WithInclude and
// WithVolatile, which name the body members that must match or do not
// count).
//
// # Acknowledgements
//
//   - first delivery of a key: fn runs; on success the result is recorded,
//     then the message is acked;
//   - a key already recorded (a redelivery, a duplicate publication): acked
//     without running fn; a recorded final failure is terminated;
//   - another delivery of the key is running: NakWithDelay with the
//     engine's RetryAfter (at most WithRetryHint, at most the lease left),
//     so the copy comes back when the first has likely finished;
//   - fn fails with a final error (the ErrorCodec of WithErrorCodec, or the
//     WithFinal predicate): Term; a transient error, a panic or a store
//     failure: NakWithDelay with a back-off, and the key is released for
//     the retry;
//   - the same key with another body: answered by the key's record like
//     any copy (acked as a replay), and reported (Outcome.Mismatch, an
//     idemkit.EventMismatch, a warning); WithFingerprint terminates it
//     instead.
//
// # Retries
//
// A failed delivery is nakked with a delay that doubles with the server's
// delivery count (Metadata().NumDelivered), from DefaultRetryDelay (1 s)
// up to DefaultMaxRetryDelay (1 min) (WithBackoff, WithRetryDelay), so a
// failing message does not hold up the others, which the server delivers
// meanwhile. When delivery number DefaultMaxAttempts (10, WithMaxAttempts)
// fails, the message is not nakked again: with WithDeadLetter a copy is
// published to a dead-letter subject and, once stored, the message is
// terminated; without it the message is terminated, which a
// limits-retention stream keeps but a work-queue or interest stream
// deletes (the server's MSG_TERMINATED advisory names its sequence). The
// count includes deliveries nakked because another delivery of the key was
// running. Store failures are retried with the same back-off but never
// exhaust a message. A handler panic is recovered: it is a failed attempt
// (Outcome.Panicked, Err wrapping ErrPanic, logged at Error with its
// stack), never recorded as a final failure, so the consumer goes on.
// WithReport hands every Outcome to a function, for metrics. A retried
// message keeps its key, so its effect still runs at most once: a failed
// attempt releases the key, a succeeded one records it.
//
// Once fn has succeeded the message is acked even when its result could
// not be recorded (the error is in Outcome.Err and the log), and a result
// too large to keep (idemkit.WithMaxResultSize) leaves a terminal record
// whose redeliveries are acked without running fn: running the
// effect again because of the idempotency store is the duplicate the
// Handler exists to prevent. Batches (Fetch, HandleBatch, HandleMsgs)
// claim all their keys with one engine call, BeginBatch, which costs one
// store call on stores that implement store.Batcher.
//
// # Crashes
//
// A consumer that dies between the effect and the ack (after the record
// was written) leaves the message unacked: JetStream redelivers it after
// AckWait, the record answers, and the message is acked without the effect
// running again. A consumer that dies after claiming a key but before the
// effect leaves an in-progress claim: deliveries of the key are nakked with
// the retry hint until the claim's lease expires (WithLease; no heartbeat
// extends it once the process is gone), then a redelivery runs fn. Only a
// crash after the effect but before its record is written can repeat the
// effect; make that window small, or write the effect and the record in
// one transaction (idemkit's Claim.CompleteIn with a transactional store).
//
// Deliveries that outlive AckWait are redelivered while they still run;
// the copies find the key in progress and are nakked, so the effect still
// runs once. To avoid the traffic, keep AckWait above the usual handler
// time, or have the Handler send InProgress signals (WithInProgress).
package idemnats
