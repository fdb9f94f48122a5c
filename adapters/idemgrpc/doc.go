// Package idemgrpc puts an idemkit Engine in front of gRPC services, with
// providers in the style of go-grpc-middleware v2: build a Server or a
// Client once, then install the interceptors its methods return.
//
//	idem, err := idemgrpc.NewServer(engine,
//		idemgrpc.WithMethods("/shop.Orders/Create"),
//		idemgrpc.WithPrincipal(userFromContext))
//	if err != nil {
//		return err
//	}
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(idem.StreamServerInterceptor()),
//	)
//
// Methods are selected explicitly (WithMethods, WithSelector) because only
// the service author knows which methods are not idempotent; the others
// pass through untouched. Every option is checked by the constructor, which
// returns an error wrapping idemkit.ErrInvalid rather than build an
// interceptor that fails later.
//
// # Server
//
// The unary interceptor runs each selected call once per (principal,
// method, idempotency key). The key comes from the "idempotency-key"
// request metadata (WithMetadataKey); the payload fingerprint is the
// deterministic protobuf encoding of the request with the full method
// name. The first call runs the handler and its response is stored (type
// name and bytes); every repeat gets it back, rebuilt through the type
// resolver (WithTypeResolver), with the response header
// "idempotent-replayed: true". A handler error whose code is final (WithFinalCodes) is
// stored and replayed as the same status, code, message and details; any
// other error releases the key so a retry runs the handler again.
//
// Once the handler has run, its own outcome is returned even when it could
// not be recorded (store failure, lost lease, response over
// idemkit.WithMaxResultSize): work that was done is never hidden. A
// response over the size cap is not stored, but its key keeps a terminal
// record: every repeat fails with ResourceExhausted, marked with the
// ReplayedHeader, and the handler never runs twice
// (WithEngineOptions(idemkit.WithOversized(idemkit.ReleaseKey))
// releases the key instead, so a retry runs the handler again). After a
// store failure or a lost lease nothing is replayed, and a retry runs the
// handler again. Set the size cap above the largest response of a
// selected method.
//
// # Streams
//
// The stream interceptor admits each selected stream once per (principal,
// method, key) inside the engine's Guard window (idemkit.WithWindow in
// WithEngineOptions, default 5s) and refuses repeats with AlreadyExists,
// carrying an errdetails.RetryInfo with the time left in the window.
// Streams get claim-once, not replay: a stream's responses interleave with
// the client's own messages, a retrying client has often consumed part of
// the first stream, and replaying it would mean buffering every message of
// every stream. There is no payload fingerprint either, since the request
// messages arrive after the claim. idemkit.WithRelease says what happens to
// the claim when the handler ends (default: kept for the whole window).
//
// # Keys and principals
//
// The principal (WithPrincipal) is given to the engine as the key's scope:
// keys of different callers never meet, so no caller can replay another's
// response, and the store keeps only digests of the principal and of the
// key. The key the engine sees is namespaced "grpc" and holds the full
// method name, so no other adapter's keys, nor another method's, can meet
// a call's. No status message sent to a client holds the key, the principal
// or a store error's text: store errors go to the engine's Observer, which
// logs key digests only.
//
// # Status codes
//
// A missing key (unless WithOptionalKey), or one that is empty, longer than
// MaxKeyLen bytes, not printable ASCII, or sent twice, fails with
// InvalidArgument. A repeat while the first call runs fails with Aborted,
// with an errdetails.RetryInfo detail and a grpc-retry-pushback-ms trailer
// giving the retry delay (idemkit.WithWait makes repeats wait instead). A
// reused key with a different request fails with FailedPrecondition. A
// failing store fails with Unavailable under the fail-closed policy (with
// idemkit.FailOpen the handler runs unguarded), and with Internal for any
// other store error or a stored response that cannot be rebuilt (its type
// unknown after a deploy); the handler does not run. A repeat of a call
// whose response was too large to keep fails with ResourceExhausted,
// marked replayed. A principal function
// that fails gives its own status when it returns one (status.Error), and
// Unauthenticated otherwise.
//
// # Client retries
//
// The client interceptor adds a fresh key (keying.NewToken) to each
// selected call whose metadata lacks one, once, before any attempt, so
// every resend carries the same key and the server replays instead of
// running the handler again:
//
//   - grpc-go's own retry policy (a service config retryPolicy) retries
//     below the interceptor with the metadata it set, and honours the
//     grpc-retry-pushback-ms trailer the server sets with Aborted.
//   - the interceptor's own retries (WithRetries) resend on Unavailable
//     after a jittered exponential backoff (WithBackoff), and on Aborted
//     carrying a RetryInfo after the delay it gives, unless that delay is
//     over the maximum backoff. A wait that cannot end before ctx's
//     deadline is not started: the last error is returned.
//
// Using both multiplies the attempts. Per call, WithCallKey chooses the key
// (to resend a call made before a restart) and WithoutIdempotency sends a
// call as it is.
//
// The stream client interceptor (Client.StreamClientInterceptor) gives
// each selected stream a key the same way; it does not resend streams.
//
// # Fencing tokens
//
// With WithFenceMetadata, both client interceptors send the fencing token
// of the idemkit claim whose work makes a call (idemkit.FenceFromContext)
// in a metadata entry (FenceMetadataKey is a suggested name). The called
// service reads it with FenceFromIncomingContext, keeps the highest token
// seen per idempotency key and refuses a lower one: a caller whose lease
// ended while it was stalled cannot act once the caller that took the key
// over has been there.
package idemgrpc
