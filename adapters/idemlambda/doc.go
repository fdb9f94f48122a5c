// Package idemlambda makes AWS Lambda handlers idempotent with idemkit:
// what Powertools' idempotency utility gives Python, TypeScript, Java and
// .NET functions, for Go, over any idemkit store (DynamoDB, Redis, SQL).
//
//	h, err := idemlambda.Wrap(engine, "orders", handle,
//		idemlambda.WithKeyPath("body.orderId"))
//	...
//	lambda.Start(h)
//
// Wrap guards a typed handler func(ctx, In) (Out, error); EventBridge
// keys EventBridge events by their id; APIGateway and HTTPAPI guard API
// Gateway REST and HTTP API handlers, replaying their responses byte for
// byte and answering missing keys, duplicates in flight and reused keys
// with RFC 9457 problems; SQS runs an SQS batch handler once per message
// and reports partial batch failures.
//
// # Keys and payloads
//
// An invocation's key comes from the event: a function of the typed event
// (WithKeyFunc), a path into its JSON (WithKeyPath: "body.orderId",
// "headers.Idempotency-Key", "detail.id"), or each constructor's default
// (the Idempotency-Key header, the SQS message ID, the EventBridge id).
// An event without it fails with an error wrapping ErrNoKey that names the
// path. API Gateway keys come from clients, so APIGateway and HTTPAPI
// scope them by the caller (WithPrincipalPath, WithPrincipalFunc): one
// caller's key never replays another caller's response. WithPayloadPaths selects the parts of the event a repeat must
// repeat: a repeat whose values there differ fails with
// idemkit.ErrMismatch.
//
// # Leases and deadlines
//
// Lambda stops an invocation at its deadline, which the runtime puts on
// the handler's context. Under a deadline each claim's lease is the time
// left, without a heartbeat: the claim of an invocation that timed out
// ends when the invocation did, so its retry is not kept out by a long
// lease (Powertools' "in-progress expiry" from the remaining time). An
// invocation without a deadline (a test, a local run) takes the engine's
// lease and heartbeat.
//
// # Results and errors
//
// Results are stored with the engine's Codec (JSON by default) and a
// replay returns the decoded copy. An error of the handler frees the key
// so a retry runs again, unless the engine's ErrorCodec
// (idemkit.WithErrorCodec, idemkit.FinalErrors) marks it final: it is then
// stored and replayed, errors.Is still matching, as idemfunc does. A
// concurrent duplicate gets idemkit.ErrInProgress with a retry hint, or
// waits for the first result with idemkit.WithWait in WithEngineOptions.
//
// # Local cache across warm invocations
//
// Build the engine over nearcache.New(store, idemkit.Settled), bounded by
// nearcache.WithCapacity, in the function's init: a warm execution
// environment answers a repeat of a completed key from its memory,
// without a store round trip.
//
// # Turning it off in tests
//
// WithDisableEnv(DefaultDisableEnv) reads IDEMKIT_DISABLED when the
// handler is built: "1" or "true" runs the handler bare. Where
// AWS_LAMBDA_FUNCTION_NAME is set, as in every deployed function, the
// switch is refused (the handler is not built) unless WithDisableInLambda
// is given too.
//
// The guide is docs/lambda.md.
package idemlambda
